/* modelc ahead-of-time core, by topic; include the narrowest one:
 *   kir.h      the kernel IR, ISAs and the IR builder
 *   lower.h    fusion groups and lowering nodes into kernels
 *   program.h  the program, its stages and the memory plan
 *   compile.h  the public compile API, emitters, stack, harness, verify
 *   target.h   the target descriptors and the resolved target
 * This header includes them all (tools and tests). */
#ifndef MODELC_AOT_H
#define MODELC_AOT_H

#include "compile.h"

#endif
