/* The stored inputs (build/inputs.c, written by tools/mkdata from the
 * Makefile): declared here with the models' sizes, so that a count in the
 * Makefile that does not match a model fails to compile. */
#ifndef INPUTS_H
#define INPUTS_H

#include "digits.h"
#include "embedding.h"
#include "hey_jarvis.h"
#include "embpools.h"

#define DIGITS_IMAGES 8
extern const float digits_images[DIGITS_IMAGES * DIGITS_INPUT_0_NUMEL];
extern const float embedding_input[EMBEDDING_INPUT_0_NUMEL];
extern const float hey_jarvis_input[HEY_JARVIS_INPUT_0_NUMEL];

#endif
