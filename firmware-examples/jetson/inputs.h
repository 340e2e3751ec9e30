/* The stored inputs (inputs.c in the build directory, written by
 * ../tools/mkdata from build.ninja): declared here with the models' sizes,
 * so that a count in build.ninja that does not match a model fails to
 * compile. The same seeds as the cortex-m4 example: the same values. */
#ifndef INPUTS_H
#define INPUTS_H

#include "embedding.h"
#include "hey_jarvis.h"

extern const float embedding_input[EMBEDDING_INPUT_0_NUMEL];
extern const float hey_jarvis_input[HEY_JARVIS_INPUT_0_NUMEL];

#endif
