# modelc.mk: an ONNX model as a static library in a Make build.
#
#   MODELC := path/to/modelc             # optional: the modelc binary (a path or a name on PATH)
#   include path/to/modelc.mk            # installed: PREFIX/share/modelc/modelc.mk
#   $(eval $(call modelc_add_model,NAME,MODEL.onnx,OUTDIR,COMPILE OPTIONS))
#
# For NAME it defines
#   NAME_LIB     OUTDIR/libNAME.a: the generated C compiled with this build's
#                $(CC) and $(CFLAGS) (a cross compiler works) and $(AR); with
#                `--target llvm` among the options, modelc writes it itself
#                (then give --triple and --cpu for the board)
#   NAME_CFLAGS  -IOUTDIR: NAME.h and modelc_rt.h
# and the rules that make them. `modelc compile` runs again when the model,
# the modelc binary or the options change; it rewrites only the sources
# whose text changed, and OUTDIR/NAME.stamp records the run, so that a
# touched model regenerates and relinks, and a build with nothing changed
# does nothing.

# Without MODELC (or with it empty): installed as PREFIX/share/modelc/modelc.mk,
# the modelc installed beside it, PREFIX/bin/modelc (found from this file's
# own place, so an installed tree works from DESTDIR or moved); else modelc
# on PATH.
modelc_mk_dir := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))
ifeq ($(strip $(MODELC)),)
MODELC := $(firstword $(wildcard $(patsubst %/share/modelc/,%/bin/modelc,$(filter %/share/modelc/,$(modelc_mk_dir)))) modelc)
endif
MODELC_BIN := $(shell command -v $(MODELC) 2>/dev/null)

define modelc_add_model
# these rules do not take the including Makefile's default goal
modelc_saved_goal := $$(.DEFAULT_GOAL)
$(1)_LIB := $(3)/lib$(1).a
$(1)_CFLAGS := -I$(3)
$(1)_SRCS := $(3)/$(1).c $(3)/$(1)_weights.c
$(1)_OBJS := $(3)/$(1).o $(3)/$(1)_weights.o

# the options are part of the stamp's inputs: a changed option regenerates
$(3)/$(1).options: FORCE
	@mkdir -p $(3)
	@echo '$(4)' | cmp -s - $$@ || echo '$(4)' > $$@

$(3)/$(1).stamp: $(2) $(MODELC_BIN) $(3)/$(1).options
	$(MODELC) compile $(2) -o $(3) --name $(1) $(4)
	@touch $$@

ifneq (,$(findstring --target llvm,$(4)))
# the llvm target writes the library itself: no sources to compile
$(1)_SRCS :=
$(1)_OBJS :=
$$($(1)_LIB) $(3)/$(1).h: $(3)/$(1).stamp ;
else
$(3)/$(1).c $(3)/$(1)_weights.c $(3)/$(1).h: $(3)/$(1).stamp ;

$(3)/%.o: $(3)/%.c $(3)/$(1).h
	$$(CC) $$(CFLAGS) -I$(3) -c $$< -o $$@

$$($(1)_LIB): $$($(1)_OBJS) $(3)/$(1).stamp
	@rm -f $$@
	$$(AR) rcs $$@ $(3)/$(1).o $(3)/$(1)_weights.o
endif

.DEFAULT_GOAL := $$(modelc_saved_goal)
endef

modelc_saved_goal := $(.DEFAULT_GOAL)
.PHONY: FORCE
FORCE:
.DEFAULT_GOAL := $(modelc_saved_goal)
