/* Graph-editing utilities shared by the freezing passes. They keep the IR's
 * invariants: value indices never change, every value's producer names the
 * node that writes it (or -1), and subgraphs' captured values (outer) follow
 * the parent's values they read. */
#ifndef MODELC_GRAPH_EDIT_H
#define MODELC_GRAPH_EDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "freezing.h"

/* True if value v is one of g's outputs. */
bool ge_is_graph_output(const mc_graph *g, int v);
/* Uses of every value (node inputs, implicit inputs, graph outputs), as a
 * malloc'd array of g->n_values counts. */
int *ge_use_counts(const mc_graph *g);
/* Every read of value `from` by g's nodes (inputs and implicit inputs) and
 * by the captured values of their subgraphs now reads `to`. Graph outputs
 * are left alone: their names are the model's interface. */
void ge_replace_uses(mc_graph *g, int from, int to);

/* Deferred replacements, for a pass that replaces many values: one sweep
 * of the graph each (ge_replace_uses) is quadratic on a chain of 100k
 * Identity nodes. The pass records them in a table of n_values entries
 * (to[v]: v's replacement, -1 none; a replacement may be replaced in
 * turn), renames what each node reads as it walks the nodes in order
 * (ge_rename_reads), then applies the table once to the whole graph
 * (ge_renames_apply) for the nodes it had walked past. */
int *ge_renames_new(const mc_graph *g);
/* What v stands for after every replacement recorded in `to`. */
int ge_renamed(int *to, int v);
void ge_rename_reads(mc_node *n, int *to);
void ge_renames_apply(mc_graph *g, int *to);
/* marks[v] true if value v is one of g's outputs: n_values entries. */
bool *ge_output_marks(const mc_graph *g);

/* Frees what a node owns (not the node struct itself). */
void ge_node_free(mc_node *n);
/* Removes the nodes marked in dead[] (n_nodes entries), keeping the order of
 * the others; producers are renumbered, those of removed nodes become -1.
 * Returns how many were removed. */
int ge_remove_nodes(mc_graph *g, const bool *dead);
/* Replaces node `pos` (freed) by `count` nodes taken from `nodes` (the
 * structs are moved; the array stays the caller's). Producers of their
 * outputs are set, later nodes renumbered. */
void ge_splice_nodes(mc_graph *g, int pos, mc_node *nodes, int count);
/* Attaches subgraph `sub` under `parent`: parent pointer and depths. */
void ge_reparent(mc_graph *sub, mc_graph *parent);

/* Runs `pass` on the branches of every If node of g (the pass descends
 * further itself), then refreshes those nodes' implicit inputs. Loop and
 * Scan bodies are left alone: they are typed again for each iteration,
 * so what their stored types say may not hold for every iteration. Returns
 * the sum of the changes, or -1. */
int ge_run_on_branches(mc_graph *g, const mc_freeze_opts *o,
                       int (*pass)(mc_graph *, const mc_freeze_opts *));
/* Node n's implicit inputs become the parent values its subgraphs' captured
 * values still read (a pass may have removed the last reader). */
void ge_refresh_implicit(mc_node *n);

/* A name not yet used in g: base itself, else base_2, base_3... malloc'd. */
char *ge_unique_name(const mc_graph *g, const char *base);
/* A new constant value holding t (the graph takes ownership), named after
 * base (made unique). Returns its index. */
int ge_add_const(mc_graph *g, const char *base, mc_tensor *t);
/* Turns value v into a constant holding t (taken): no producer any more. */
void ge_make_const(mc_graph *g, int v, mc_tensor *t);

/* Identity node reading `in` and writing `out` (out's producer is set by
 * ge_splice_nodes or by the caller). */
mc_node ge_identity_node(const mc_graph *g, const char *name, int in, int out);

/* Replaces If node `pos` by its branches' nodes, the If's output values
 * keeping their indices: which = 1 the then branch, 0 the else branch (a
 * known condition), -1 both, each node guarded by the condition
 * (mc_node.guard), each branch copying its results into the If's outputs:
 * code generation runs one branch or the other. */
void ge_inline_if(mc_graph *g, int pos, int which);

/* Constant folding with the cap report chosen by the caller: mc_freeze
 * repeats the passes and reports the cap once, at the end. Returns the
 * number of changes, or -1. */
int freeze_fold(mc_graph *g, const mc_freeze_opts *o, bool report);
/* Reports (mc_warn, and the list on o->stats) nodes that fold would
 * evaluate but for the size cap. Returns their count. */
int freeze_fold_report(mc_graph *g, const mc_freeze_opts *o);
/* The cap in effect: o->fold_limit, or the default when o is NULL or the
 * limit is 0. */
size_t freeze_fold_limit(const mc_freeze_opts *o);

#endif
