/* Test support: builds ONNX ModelProto bytes with the protobuf-c generated
 * API (no hand-written protobuf), and captures diagnostics.
 *
 * Every message and string a builder makes lives in the builder's pool and
 * is freed by mb_free; messages are linked by pointer, so the generated
 * pack functions serialise the whole tree. */
#ifndef MODEL_BUILDER_H
#define MODEL_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modelc.h"
#include "onnx/onnx.pb-c.h"

typedef struct mb mb;

/* A model with ir_version 8, importing `opset` of the default domain, and
 * an empty main graph named "main". */
mb *mb_new(int64_t opset);
void mb_free(mb *b);
Onnx__ModelProto *mb_model(mb *b);
Onnx__GraphProto *mb_main(mb *b);
/* A fresh graph, for If branches and other graph attributes. */
Onnx__GraphProto *mb_graph(mb *b, const char *name);
/* Adds an opset_import entry ("" is the default domain). */
void mb_opset_import(mb *b, const char *domain, int64_t version);

/* Shapes are written as comma-separated dims: "2,3"; a name gives a
 * dim_param ("N,3"); "?" a dimension with neither value nor param; ""
 * a scalar. A NULL shape declares no shape at all. Numbers may be as large
 * as int64 allows ("4611686018427387904"). */
Onnx__ValueInfoProto *mb_input(mb *b, Onnx__GraphProto *g, const char *name, int dtype,
                               const char *shape);
void mb_output(mb *b, Onnx__GraphProto *g, const char *name);

/* A TensorProto with a name, a data type and dims (same notation, numbers
 * only), holding no data yet. */
Onnx__TensorProto *mb_tensor(mb *b, const char *name, int dtype, const char *dims);
void mb_raw(mb *b, Onnx__TensorProto *t, const void *data, size_t len);
void mb_float_data(mb *b, Onnx__TensorProto *t, const float *v, size_t n);
void mb_int64_data(mb *b, Onnx__TensorProto *t, const int64_t *v, size_t n);
void mb_int32_data(mb *b, Onnx__TensorProto *t, const int32_t *v, size_t n);
/* Adds an external_data entry and marks the tensor as external. */
void mb_external(mb *b, Onnx__TensorProto *t, const char *key, const char *value);
void mb_initializer(mb *b, Onnx__GraphProto *g, Onnx__TensorProto *t);
/* Shortcut: a float initializer from raw values. */
Onnx__TensorProto *mb_init_floats(mb *b, Onnx__GraphProto *g, const char *name,
                                  const char *dims, const float *v, size_t n);

/* Shortcut: an integer initializer (int64, or a narrower type through
 * int32_data) from int64 values. */
Onnx__TensorProto *mb_init_ints(mb *b, Onnx__GraphProto *g, const char *name, int dtype,
                                const char *dims, const int64_t *v, size_t n);

/* A node; inputs and outputs are comma-separated names ("" entries are
 * omitted optionals: "a,,c"). name may be NULL (no name in the file). */
Onnx__NodeProto *mb_node(mb *b, Onnx__GraphProto *g, const char *op_type, const char *name,
                         const char *inputs, const char *outputs);
void mb_node_domain(mb *b, Onnx__NodeProto *n, const char *domain);
void mb_attr_graph(mb *b, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g);
void mb_attr_tensor(mb *b, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t);
void mb_attr_int(mb *b, Onnx__NodeProto *n, const char *name, int64_t v);
void mb_attr_float(mb *b, Onnx__NodeProto *n, const char *name, float v);
void mb_attr_string(mb *b, Onnx__NodeProto *n, const char *name, const char *v);
void mb_attr_ints(mb *b, Onnx__NodeProto *n, const char *name, const int64_t *v, size_t count);

/* A Constant node holding a bool scalar (If conditions). */
void mb_const_bool(mb *b, Onnx__GraphProto *g, const char *output, bool v);
/* An If node whose branches each output one float initializer of the
 * given values (shape `dims`). */
Onnx__NodeProto *mb_if_consts(mb *b, Onnx__GraphProto *g, const char *name, const char *cond,
                              const char *output, const char *dims, const float *then_v,
                              const float *else_v, size_t n);

/* The serialised model: malloc'd, caller frees. */
uint8_t *mb_pack(mb *b, size_t *len);
/* Writes the serialised model; 0 on success. */
int mb_write(mb *b, const char *path);
/* Packs and imports (mc_import_buffer). */
mc_graph *mb_import(mb *b, const char *model_dir, const mc_import_opts *opts);

/* Writes bytes to a file; 0 on success. */
int write_file(const char *path, const void *data, size_t len);
/* dir/file's bytes, NUL-terminated (malloc'd; NULL if unreadable); len may be NULL. */
char *read_file_in(const char *dir, const char *file, size_t *len);
/* A fresh temporary directory (malloc'd path); removed by rm_tree. */
char *make_temp_dir(void);
void rm_tree(const char *dir);

/* ---- diagnostics capture ---- */
/* Starts capturing every diagnostic line (and forgets earlier ones). */
void diag_capture(void);
int diag_count(void);
const char *diag_line(int i);
/* Lines whose text contains `needle`. */
int diag_count_with(const char *needle);
/* All captured lines joined by newlines, for assertion messages. */
const char *diag_all(void);

#endif
