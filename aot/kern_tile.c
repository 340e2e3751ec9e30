/* The register-tiled micro-kernel of the dense fast kernels (see kern.h). */
#include <string.h>

#include "kern.h"

/* ---- planning ---- */

static void add_vec(kt_shape *s, int lanes, int valid)
{
	s->lanes[s->nvec] = lanes;
	s->valid[s->nvec] = valid;
	s->nvec++;
	s->width += lanes;
}

/* Vectors per main panel: an even split of the full vectors where one
 * exists, else 4 with the rest in the tail. Four 16-lane vectors x 6 rows
 * fill AVX-512's 32 registers; more vectors leave too few rows. */
static int choose_nv(int64_t nvt)
{
	if (nvt <= 4)
		return (int)nvt;
	if (nvt % 4 == 0)
		return 4;
	if (nvt % 3 == 0)
		return 3;
	return 4;
}

/* Rows a tile of nvec vectors may take: the accumulators, the panel's
 * vectors and one broadcast fit in the registers. Scalar ISAs take 4 rows
 * (a 4 x 4 block; the compiler spills little of it). */
static int rows_for(const mc_isa *isa, int nvec, int64_t rows)
{
	int mr = isa->max_lanes == 1 ? 4 : (isa->vregs - 1 - nvec) / nvec;
	if (mr > KT_MAX_MR)
		mr = KT_MAX_MR;
	if (mr > rows)
		mr = (int)rows;
	return mr < 1 ? 1 : mr;
}

/* Accumulator sets for a tile of mr rows x nvec vectors over a reduction
 * of k: enough independent FMA chains to hide the FMA latency (about 8 on
 * current x86 cores) where k is long and registers allow. */
int kt_sets(const mc_isa *isa, int mr, int nvec, int64_t k)
{
	if (isa->max_lanes == 1 || k < 32)
		return 1;
	int s = 1;
	while (s < KT_MAX_SETS && mr * nvec * s < 8 &&
	       mr * nvec * (s + 1) + nvec + 1 <= isa->vregs)
		s++;
	return s;
}

static void finish_shape(const mc_isa *isa, kt_shape *s, int64_t k, int64_t rows)
{
	if (s->nvec == 0)
		return;
	s->mr = rows_for(isa, s->nvec, rows);
	s->sets = kt_sets(isa, s->mr, s->nvec, k);
}

static void plan(const mc_isa *isa, int64_t n, int64_t k, int64_t rows, bool direct,
                 kt_cols *cols)
{
	memset(cols, 0, sizeof *cols);
	cols->n = n;
	cols->k = k;
	cols->direct = direct;
	int lanes = isa->max_lanes;
	if (lanes == 1) {
		/* scalar: panels of 4 columns, the rest one column each */
		cols->n_main = n / 4;
		for (int j = 0; j < 4 && cols->n_main > 0; j++)
			add_vec(&cols->main, 1, 1);
		for (int j = 0; j < n % 4; j++)
			add_vec(&cols->tail, 1, 1);
	} else {
		int64_t nvt = n / lanes;
		int64_t rem = n % lanes;
		int nv = choose_nv(nvt);
		cols->n_main = nv ? nvt / nv : 0;
		for (int j = 0; j < nv; j++)
			add_vec(&cols->main, lanes, lanes);
		for (int64_t j = cols->n_main * nv; j < nvt; j++)
			add_vec(&cols->tail, lanes, lanes);
		/* the rest: narrower full vectors, then one padded vector */
		for (int l = lanes / 2; l >= 4; l /= 2)
			if (rem >= l && mc_isa_has_lanes(isa, l)) {
				add_vec(&cols->tail, l, l);
				rem -= l;
			}
		if (rem > 0 && direct) {
			for (int64_t j = 0; j < rem; j++)
				add_vec(&cols->tail, 1, 1);
		} else if (rem > 0) {
			int l = 4;
			while (!mc_isa_has_lanes(isa, l) || l < rem)
				l *= 2;
			add_vec(&cols->tail, l, (int)rem);
		}
	}
	finish_shape(isa, &cols->main, k, rows);
	finish_shape(isa, &cols->tail, k, rows);
}

int64_t kt_plan_rows(const mc_kb *kb, int64_t rows)
{
	return kb->sizes_vary ? INT64_MAX / 4 : rows;
}

void kt_plan(const mc_isa *isa, int64_t n, int64_t k, int64_t rows, kt_cols *cols)
{
	plan(isa, n, k, rows, false, cols);
}

/* Direct columns where sizes vary (kt_cols.n_vary): main panels of 4
 * full vectors (4 columns on scalar ISAs), then the parts of a rest below
 * that, halving: each part its full vectors, or one narrower vector the
 * ISA has (4 lanes or more); what the parts leave goes one by one. Nothing
 * here depends on n but n_main, which the kernel recomputes at run time. */
static void plan_vary(const mc_isa *isa, int64_t n, int64_t k, int64_t rows, kt_cols *cols)
{
	memset(cols, 0, sizeof *cols);
	cols->n = n;
	cols->k = k;
	cols->direct = true;
	cols->n_vary = true;
	int lanes = isa->max_lanes;
	for (int j = 0; j < 4; j++)
		add_vec(&cols->main, lanes, lanes);
	cols->n_main = n / cols->main.width;
	int64_t below = cols->main.width; /* the rest's bits below this: no part yet */
	for (int w = (int)cols->main.width / 2; w >= 1 && cols->n_parts < KT_MAX_PARTS; w /= 2) {
		kt_shape *s = &cols->parts[cols->n_parts];
		if (w >= lanes)
			for (int j = 0; j < w / lanes; j++)
				add_vec(s, lanes, lanes);
		else if (w >= 4 && mc_isa_has_lanes(isa, w))
			add_vec(s, w, w);
		else
			break;
		cols->n_parts++;
		below = w;
	}
	cols->single_mask = below - 1;
	if (cols->single_mask > 0)
		add_vec(&cols->single, 1, 1);
	/* the sets at a depth under 32 as at 32, so that a depth that is the
	 * dynamic size does not change them (kt_tile_reduce takes any) */
	int64_t k_sets = k < 32 ? 32 : k;
	finish_shape(isa, &cols->main, k_sets, rows);
	for (int i = 0; i < cols->n_parts; i++)
		finish_shape(isa, &cols->parts[i], k_sets, rows);
	finish_shape(isa, &cols->single, k_sets, rows);
}

void kt_plan_direct(const mc_kb *kb, int64_t n, int64_t k, int64_t rows, kt_cols *cols)
{
	if (kb->sizes_vary)
		plan_vary(kb->isa, n, k, rows, cols);
	else
		plan(kb->isa, n, k, rows, true, cols);
}

void kt_plan_gemv(const mc_kb *kb, int64_t n, int64_t k, kt_cols *cols)
{
	if (!kb->target->mcu_templates || kb->isa->kind != MC_ISA_CORTEX_M) {
		kt_plan(kb->isa, n, k, 1, cols);
		return;
	}
	memset(cols, 0, sizeof *cols);
	cols->n = n;
	cols->k = k;
	cols->gemv_f32 = true;
	cols->n_main = n / MC_GEMV_BLOCK;
	if (cols->n_main > 0)
		add_vec(&cols->main, MC_GEMV_BLOCK, MC_GEMV_BLOCK);
	if (n % MC_GEMV_BLOCK)
		add_vec(&cols->tail, MC_GEMV_BLOCK, (int)(n % MC_GEMV_BLOCK));
}

/* ---- packing ---- */

/* Columns [col0, col0 + s->width) of row kk laid out at dst, padding 0. */
static void pack_row(float *dst, const kt_shape *s, int64_t col0, int64_t kk, kt_get_fn get,
                     const void *ctx)
{
	int64_t off = 0;
	for (int v = 0; v < s->nvec; v++) {
		for (int l = 0; l < s->lanes[v]; l++)
			dst[off + l] = l < s->valid[v] ? (float)get(ctx, kk, col0 + off + l) : 0.0f;
		off += s->lanes[v];
	}
}

static mc_tensor *new_floats(int64_t n)
{
	mc_shape s = { .rank = 1 };
	s.dims[0] = n;
	return mc_tensor_new(MC_FLOAT, &s);
}

int64_t kt_packed_cols(const kt_cols *cols)
{
	if (cols->n_vary)
		return cols->n;
	return cols->n_main * cols->main.width + cols->tail.width;
}

static int64_t gcd(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

int kt_tile_rows(const kt_cols *cols)
{
	if (!cols->n_vary)
		return cols->n_main > 0 ? cols->main.mr : cols->tail.mr;
	int64_t m = cols->main.mr;
	for (int i = 0; i <= cols->n_parts; i++) {
		const kt_shape *s = i < cols->n_parts ? &cols->parts[i] : &cols->single;
		if (s->nvec > 0)
			m = m / gcd(m, s->mr) * s->mr;
	}
	return (int)m;
}

int64_t kt_packed_bytes(const kt_cols *cols)
{
	return 4 * cols->k * kt_packed_cols(cols);
}

int kt_pack(mc_kb *kb, const kt_cols *cols, kt_get_fn get, const void *ctx)
{
	mc_tensor *t = new_floats(cols->k * kt_packed_cols(cols));
	if (!t)
		return -1;
	float *d = t->data;
	int64_t w = cols->main.width;
	for (int64_t p = 0; p < cols->n_main; p++)
		for (int64_t kk = 0; kk < cols->k; kk++)
			pack_row(d + (p * cols->k + kk) * w, &cols->main, p * w, kk, get, ctx);
	float *tail = d + cols->n_main * cols->k * w;
	for (int64_t kk = 0; kk < cols->k && cols->tail.nvec; kk++)
		pack_row(tail + kk * cols->tail.width, &cols->tail, cols->n_main * w, kk, get, ctx);
	return mc_kb_packed(kb, t);
}

int kt_pack_bias(mc_kb *kb, const kt_cols *cols, kt_get_fn get, const void *ctx)
{
	mc_tensor *t = new_floats(kt_packed_cols(cols));
	if (!t)
		return -1;
	float *d = t->data;
	int64_t w = cols->main.width;
	for (int64_t p = 0; p < cols->n_main; p++)
		pack_row(d + p * w, &cols->main, p * w, 0, get, ctx);
	if (cols->tail.nvec)
		pack_row(d + cols->n_main * w, &cols->tail, cols->n_main * w, 0, get, ctx);
	return mc_kb_packed(kb, t);
}

/* ---- panels and tiles ---- */

/* Packed, a panel's k rows follow each other; direct, B's rows are n apart
 * and a panel starts at its first column. */
kt_panel kt_main_panel(mc_kb *kb, const kt_cols *cols, mc_kexpr *p)
{
	int64_t w = cols->main.width;
	mc_kexpr *col0 = mc_kb_let(kb, mc_k_muli(kb, p, w));
	if (cols->direct)
		return (kt_panel){ &cols->main, col0, col0, cols->n };
	return (kt_panel){ &cols->main, col0, mc_kb_let(kb, mc_k_muli(kb, p, w * cols->k)), w };
}

kt_panel kt_tail_panel(mc_kb *kb, const kt_cols *cols)
{
	int64_t w = cols->main.width, col0 = cols->n_main * w;
	if (cols->direct)
		return (kt_panel){ &cols->tail, mc_k_index(kb, col0), mc_k_index(kb, col0), cols->n };
	return (kt_panel){ &cols->tail, mc_k_index(kb, col0), mc_k_index(kb, col0 * cols->k),
	                   cols->tail.width };
}

kt_panel kt_direct_panel(const kt_cols *cols, const kt_shape *s, mc_kexpr *col0)
{
	return (kt_panel){ s, col0, col0, cols->n };
}

/* Offset of vector v within its panel. */
static int64_t vec_off(const kt_shape *s, int v)
{
	int64_t off = 0;
	for (int j = 0; j < v; j++)
		off += s->lanes[j];
	return off;
}

static mc_kexpr *fzero(mc_kb *kb, int lanes)
{
	return mc_k_splat(kb, mc_k_float(kb, MC_KT_F32, 0), lanes);
}

void kt_tile_init(mc_kb *kb, kt_tile *t, int bias_buf)
{
	const kt_shape *s = t->panel.shape;
	if (t->sets < 1)
		t->sets = 1;
	for (int v = 0; v < s->nvec; v++) {
		mc_kexpr *init = fzero(kb, s->lanes[v]);
		if (bias_buf >= 0)
			init = mc_kb_let(kb, mc_k_vload(kb, bias_buf,
			                                mc_k_addi(kb, t->panel.col0, vec_off(s, v)),
			                                s->lanes[v]));
		for (int set = 0; set < t->sets; set++)
			for (int r = 0; r < t->mr; r++)
				t->acc[set][r][v] = mc_kb_local(kb, set == 0 ? init : fzero(kb, s->lanes[v]));
	}
}

void kt_tile_step(mc_kb *kb, kt_tile *t, int set, mc_kexpr *a_off, mc_kexpr *b_k)
{
	const kt_shape *s = t->panel.shape;
	mc_kexpr *bv[KT_MAX_VEC];
	mc_kexpr *brow = mc_k_add(kb, t->panel.b0, mc_k_muli(kb, b_k, t->panel.b_stride));
	for (int v = 0; v < s->nvec; v++)
		bv[v] = mc_kb_let(kb, mc_k_vload(kb, t->b_buf, mc_k_addi(kb, brow, vec_off(s, v)),
		                                 s->lanes[v]));
	for (int r = 0; r < t->mr; r++) {
		mc_kexpr *a = mc_kb_let(kb, mc_k_load(kb, t->a_buf, mc_k_add(kb, t->a_row[r], a_off)));
		for (int v = 0; v < s->nvec; v++) {
			mc_kexpr *acc = t->acc[set][r][v];
			mc_kb_assign(kb, acc, mc_k_fma(kb, a, bv[v], acc));
		}
	}
}

/* Round kk of a reduction: step kk * sets + set on accumulator set `set`,
 * for every set. */
static void reduce_round(mc_kb *kb, kt_tile *t, mc_kexpr *kk, int64_t a_step)
{
	for (int set = 0; set < t->sets; set++) {
		mc_kexpr *k = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, kk, t->sets), set));
		kt_tile_step(kb, t, set, mc_k_muli(kb, k, a_step), k);
	}
}

void kt_tile_reduce(mc_kb *kb, kt_tile *t, int64_t len, int64_t a_step)
{
	int sets = t->sets;
	if (kb->sizes_vary) {
		/* the length in a variable (it may be the dynamic size): the
		 * loop's count computed and each step past the last full round
		 * behind a test, the same sums in the same order */
		mc_kexpr *n = mc_kb_local(kb, mc_k_index(kb, len));
		mc_kexpr *full = mc_kb_let(kb, mc_k_div(kb, n, mc_k_index(kb, sets)));
		reduce_round(kb, t, mc_kb_for(kb, mc_k_index(kb, 0), full, MC_KF_REDUCE), a_step);
		mc_kb_end(kb);
		mc_kexpr *k0 = mc_kb_let(kb, mc_k_muli(kb, full, sets));
		for (int set = 0; set + 1 < sets; set++) {
			mc_kexpr *k = mc_kb_let(kb, mc_k_addi(kb, k0, set));
			mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, k, n));
			kt_tile_step(kb, t, set, mc_k_muli(kb, k, a_step), k);
			mc_kb_end(kb);
		}
		return;
	}
	int64_t full = len / sets;
	if (full > 0) {
		reduce_round(kb, t, full == 1 ? mc_k_index(kb, 0) : mc_kb_fori(kb, full, MC_KF_REDUCE), a_step);
		if (full > 1)
			mc_kb_end(kb);
	}
	for (int64_t k = full * sets; k < len; k++)
		kt_tile_step(kb, t, (int)(k - full * sets), mc_k_index(kb, k * a_step),
		             mc_k_index(kb, k));
}

/* Lane by lane: a padded vector's columns inside the output. */
static void store_lanes(mc_lower_ctx *c, mc_kexpr *v, int valid, mc_kexpr **coords,
                        mc_kexpr *lin)
{
	mc_kb *kb = c->kb;
	int last = c->out[0]->shape.rank - 1;
	mc_kexpr *col = coords ? coords[last] : NULL;
	for (int l = 0; l < valid; l++) {
		if (coords)
			coords[last] = mc_k_addi(kb, col, l);
		mc_lower_store(c, 0, coords, mc_k_addi(kb, lin, l), mc_k_lane(kb, v, l));
	}
}

void kt_tile_store(mc_lower_ctx *c, kt_tile *t, mc_kexpr *const *row_lin,
                   mc_kexpr **const *row_coords)
{
	mc_kb *kb = c->kb;
	const kt_shape *s = t->panel.shape;
	int rank = c->out[0]->shape.rank;
	for (int r = 0; r < t->mr; r++) {
		for (int v = 0; v < s->nvec; v++) {
			mc_kexpr *sum = t->acc[0][r][v];
			for (int set = 1; set < t->sets; set++)
				sum = mc_k_add(kb, sum, t->acc[set][r][v]);
			mc_kexpr *col = mc_kb_let(kb, mc_k_addi(kb, t->panel.col0, vec_off(s, v)));
			mc_kexpr *lin = mc_kb_let(kb, mc_k_add(kb, row_lin[r], col));
			mc_kexpr *coords[MC_MAX_RANK], **cp = NULL;
			if (row_coords && row_coords[r]) {
				memcpy(coords, row_coords[r], sizeof *coords * (size_t)rank);
				coords[rank - 1] = col;
				cp = coords;
			}
			if (s->lanes[v] == 1)
				mc_lower_store(c, 0, cp, lin, sum);
			else if (s->valid[v] == s->lanes[v])
				mc_lower_store_vec(c, 0, cp, lin, sum);
			else
				store_lanes(c, mc_kb_let(kb, sum), s->valid[v], cp, lin);
		}
	}
}

/* ---- one row into a buffer ---- */

static void gemv_panel(mc_kb *kb, const kt_cols *cols, kt_panel panel, int a_buf, mc_kexpr *a_at,
                       int b_buf, int bias_buf, int out_buf)
{
	const kt_shape *s = panel.shape;
	kt_tile t = { .panel = panel, .mr = 1, .a_buf = a_buf, .b_buf = b_buf };
	t.sets = kt_sets(kb->isa, 1, s->nvec, cols->k);
	t.a_row[0] = a_at;
	kt_tile_init(kb, &t, bias_buf);
	kt_tile_reduce(kb, &t, cols->k, 1);
	for (int v = 0; v < s->nvec; v++) {
		mc_kexpr *sum = t.acc[0][0][v];
		for (int set = 1; set < t.sets; set++)
			sum = mc_k_add(kb, sum, t.acc[set][0][v]);
		mc_kb_store(kb, out_buf, mc_k_addi(kb, panel.col0, vec_off(s, v)), sum);
	}
}

void kt_gemv(mc_kb *kb, const kt_cols *cols, int a_buf, mc_kexpr *a_at, int b_buf, int bias_buf,
             int out_buf)
{
	a_at = mc_kb_let(kb, a_at);
	if (cols->gemv_f32) {
		/* main and tail panels lie one after the other: blocks alike */
		mc_ktemplate t = { .kind = MC_TMPL_GEMV_F32, .x = a_buf, .x_at = a_at, .wt = b_buf,
		                   .bias = bias_buf, .out = out_buf, .kp = cols->k,
		                   .tiles = cols->n_main + (cols->tail.nvec > 0) };
		mc_kb_template(kb, &t);
		return;
	}
	if (cols->n_main > 0) {
		mc_kexpr *p = cols->n_main == 1 ? mc_k_index(kb, 0) : mc_kb_fori(kb, cols->n_main, 0);
		gemv_panel(kb, cols, kt_main_panel(kb, cols, p), a_buf, a_at, b_buf, bias_buf, out_buf);
		if (cols->n_main > 1)
			mc_kb_end(kb);
	}
	if (cols->tail.nvec > 0)
		gemv_panel(kb, cols, kt_tail_panel(kb, cols), a_buf, a_at, b_buf, bias_buf, out_buf);
}
