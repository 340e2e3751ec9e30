/*
 * Host tool of the firmware examples: compares the outputs a firmware run
 * printed with the host's, model by model.
 *
 * usage: compare HOST.log TARGET.log [RTOL [ULPS]]
 * Both logs hold lines `out MODEL INDEX COUNT` followed by COUNT lines of
 * hex float32 bits (what the examples' main.c prints). Per output:
 * max|target - host| / max|host| must be <= RTOL (default 1e-5); with
 * ULPS, also every value within ULPS units in the last place of the
 * host's (0: bit-identical), and the values that differ are counted.
 * Exit status: 0 all within; 1 an output differs or is missing; 2 usage.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VALUES (1 << 20)

typedef struct {
	char model[64];
	int index;
	long count;
	float *values;
} output;

static int read_log(const char *path, output **outs, int *n)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		return -1;
	}
	char line[256];
	*outs = NULL;
	*n = 0;
	while (fgets(line, sizeof line, f)) {
		output o = { .values = NULL };
		if (sscanf(line, "out %63s %d %ld", o.model, &o.index, &o.count) != 3)
			continue;
		if (o.count <= 0 || o.count > MAX_VALUES) {
			fprintf(stderr, "%s: bad count in '%s'\n", path, line);
			fclose(f);
			return -1;
		}
		o.values = malloc((size_t)o.count * sizeof *o.values);
		for (long i = 0; o.values && i < o.count; i++) {
			unsigned long bits;
			if (!fgets(line, sizeof line, f) || sscanf(line, "%lx", &bits) != 1) {
				fprintf(stderr, "%s: %s output %d: %ld of %ld values\n", path, o.model, o.index, i, o.count);
				free(o.values);
				fclose(f);
				return -1;
			}
			uint32_t b = (uint32_t)bits;
			memcpy(&o.values[i], &b, sizeof b);
		}
		output *grown = realloc(*outs, (size_t)(*n + 1) * sizeof **outs);
		if (!o.values || !grown) {
			fprintf(stderr, "%s: out of memory\n", path);
			fclose(f);
			return -1;
		}
		*outs = grown;
		(*outs)[(*n)++] = o;
	}
	fclose(f);
	return 0;
}

/* units in the last place between two floats (their bits as a monotone
 * integer line); NaN against anything else: INT64_MAX */
static int64_t ulps_apart(float a, float b)
{
	uint32_t x, y;
	memcpy(&x, &a, sizeof x);
	memcpy(&y, &b, sizeof y);
	if (x == y)
		return 0;
	if (isnan(a) || isnan(b))
		return INT64_MAX;
	int64_t ox = x & 0x80000000u ? -(int64_t)(x & 0x7fffffffu) : (int64_t)x;
	int64_t oy = y & 0x80000000u ? -(int64_t)(y & 0x7fffffffu) : (int64_t)y;
	return ox > oy ? ox - oy : oy - ox;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: compare HOST.log TARGET.log [RTOL [ULPS]]\n");
		return 2;
	}
	double rtol = argc >= 4 ? strtod(argv[3], NULL) : 1e-5;
	long max_ulps = argc == 5 ? strtol(argv[4], NULL, 10) : -1;
	output *host, *target;
	int nh, nt;
	if (read_log(argv[1], &host, &nh) || read_log(argv[2], &target, &nt))
		return 1;
	if (nh == 0) {
		fprintf(stderr, "compare: %s has no outputs\n", argv[1]);
		return 1;
	}
	int fails = 0;
	printf("%-12s %5s %8s %12s %12s %12s  %s\n", "model", "out", "values", "max|diff|", "max|host|", "ratio",
	       "result");
	for (int i = 0; i < nh; i++) {
		const output *h = &host[i], *t = NULL;
		for (int j = 0; j < nt && !t; j++)
			if (!strcmp(target[j].model, h->model) && target[j].index == h->index)
				t = &target[j];
		if (!t || t->count != h->count) {
			printf("%-12s %5d %8ld  missing or of another size on the target: FAIL\n", h->model, h->index, h->count);
			fails++;
			continue;
		}
		double diff = 0, ref = 0;
		for (long k = 0; k < h->count; k++) {
			double d = fabs((double)t->values[k] - (double)h->values[k]);
			if (!(d <= diff)) /* NaN counts as a difference */
				diff = isnan(d) ? INFINITY : d;
			if (fabs((double)h->values[k]) > ref)
				ref = fabs((double)h->values[k]);
		}
		double ratio = ref > 0 ? diff / ref : diff;
		bool ok = ratio <= rtol;
		char bits_note[96] = "";
		if (max_ulps >= 0) {
			long differ = 0;
			int64_t worst = 0;
			for (long k = 0; k < h->count; k++) {
				int64_t u = ulps_apart(h->values[k], t->values[k]);
				differ += u != 0;
				if (u > worst)
					worst = u;
			}
			ok = ok && worst <= max_ulps;
			snprintf(bits_note, sizeof bits_note, " (%ld of %ld values not bit-identical, max %lld ulp)", differ,
			         h->count, (long long)worst);
		}
		printf("%-12s %5d %8ld %12.3e %12.3e %12.3e  %s%s\n", h->model, h->index, h->count, diff, ref, ratio,
		       ok ? "PASS" : "FAIL", bits_note);
		fails += !ok;
	}
	printf("compare: %d of %d outputs within %.0e\n", nh - fails, nh, rtol);
	return fails ? 1 : 0;
}
