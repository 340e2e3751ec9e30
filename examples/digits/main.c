/*
 * Demo for the code modelc generates from examples/digits/digits.onnx: runs
 * the generated digits_run() on every held-out test image, prints a few
 * predictions, the accuracy and the latency per inference.
 *
 * usage: digits-demo IMAGES LABELS [MIN_ACCURACY_PERCENT]
 *   IMAGES  test-images.bin: N x 64 little-endian float32 pixels, 0..1
 *   LABELS  test-labels.bin: N uint8 labels, 0..9
 *   MIN_ACCURACY_PERCENT  exit status 1 when the accuracy is below it
 *
 * Exit status: 0 on success; 1 when digits_run() fails or the accuracy is
 * below the threshold; 2 on a usage or file error.
 *
 * Build (digits.h and the generated sources come from modelc):
 *   cc -std=c99 -O2 -Wall -Wextra -Werror -I OUT main.c OUT/<generated .c files> -lm
 */
#define _POSIX_C_SOURCE 199309L

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "digits.h"

enum {
	PIXELS = 64,   /* 8x8 image, one channel */
	CLASSES = 10,
	SHOWN = 10,    /* predictions printed */
	MAX_PASSES = 200,
};
#define MAX_TIMING_SECONDS 1.0

/* The generated code needs one aligned scratch area; static, so no heap.
 * "+ 1" keeps the array legal when the model needs no arena at all. */
typedef char arena_alignment_is_enough[DIGITS_ARENA_ALIGN <= 64 ? 1 : -1];
static unsigned char arena[DIGITS_ARENA_BYTES + 1] __attribute__((aligned(64)));

/* Reads a whole file into a malloc'ed buffer; *size gets its length. */
static unsigned char *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	unsigned char *data = NULL;
	size_t capacity = 0, used = 0;

	if (!f) {
		fprintf(stderr, "digits: cannot open %s: %s\n", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (used == capacity) {
			size_t grown = capacity ? capacity * 2 : 65536;
			unsigned char *bigger = realloc(data, grown);
			if (!bigger) {
				fprintf(stderr, "digits: out of memory reading %s\n", path);
				free(data);
				fclose(f);
				return NULL;
			}
			data = bigger;
			capacity = grown;
		}
		size_t got = fread(data + used, 1, capacity - used, f);
		used += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, "digits: error reading %s\n", path);
		free(data);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*size = used;
	return data;
}

/* Little-endian float32 bytes to floats, whatever the host's byte order. */
static void decode_floats(const unsigned char *bytes, float *out, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const unsigned char *b = bytes + 4 * i;
		uint32_t bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 |
			(uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
		memcpy(&out[i], &bits, sizeof bits);
	}
}

static int argmax(const float *values, int count)
{
	int best = 0;
	for (int i = 1; i < count; i++)
		if (values[i] > values[best])
			best = i;
	return best;
}

static double seconds_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One inference; returns digits_run()'s status. */
static int classify(const float *image, float logits[CLASSES])
{
	const void *inputs[1] = { image };
	void *outputs[1] = { logits };
	return digits_run(arena, inputs, outputs);
}

/* Runs every image once; fills predictions[]. Returns 0 or the failing status. */
static int predict_all(const float *images, size_t count, int *predictions)
{
	float logits[CLASSES];
	for (size_t i = 0; i < count; i++) {
		int status = classify(images + i * PIXELS, logits);
		if (status != 0) {
			fprintf(stderr, "digits: digits_run failed on image %zu: status %d\n",
				i, status);
			return status;
		}
		predictions[i] = argmax(logits, CLASSES);
	}
	return 0;
}

/* Times repeated passes over the images (MAX_PASSES, or fewer once
 * MAX_TIMING_SECONDS have gone by) and prints mean and min per inference. */
static int report_latency(const float *images, size_t count)
{
	float logits[CLASSES];
	double total = 0.0, fastest = -1.0;
	size_t runs = 0;
	int passes = 0;
	double started = seconds_now();

	while (passes < MAX_PASSES && seconds_now() - started < MAX_TIMING_SECONDS) {
		for (size_t i = 0; i < count; i++) {
			double t0 = seconds_now();
			int status = classify(images + i * PIXELS, logits);
			double elapsed = seconds_now() - t0;
			if (status != 0) {
				fprintf(stderr, "digits: digits_run failed while timing: status %d\n",
					status);
				return status;
			}
			total += elapsed;
			if (fastest < 0.0 || elapsed < fastest)
				fastest = elapsed;
			runs++;
		}
		passes++;
	}
	printf("latency: mean %.2f us, min %.2f us per inference (%zu runs, %d passes)\n",
		total / (double)runs * 1e6, fastest * 1e6, runs, passes);
	return 0;
}

/* Classifies every image, prints the results and times the model.
 * Returns the exit status. */
static int evaluate(const float *images, const unsigned char *labels, size_t count,
	double min_accuracy)
{
	int *predictions = malloc(count * sizeof *predictions);
	size_t correct = 0;

	if (!predictions) {
		fprintf(stderr, "digits: out of memory\n");
		return 2;
	}
	if (predict_all(images, count, predictions) != 0) {
		free(predictions);
		return 1;
	}
	printf("arena: %lu bytes\n", (unsigned long)DIGITS_ARENA_BYTES);
	printf("first predictions (label->predicted):");
	for (size_t i = 0; i < count && i < SHOWN; i++)
		printf(" %d->%d%s", labels[i], predictions[i],
			predictions[i] == labels[i] ? "" : "(wrong)");
	printf("\n");
	for (size_t i = 0; i < count; i++)
		correct += predictions[i] == labels[i];
	free(predictions);

	double accuracy = 100.0 * (double)correct / (double)count;
	printf("accuracy: %zu/%zu = %.2f%%\n", correct, count, accuracy);
	if (report_latency(images, count) != 0)
		return 1;
	if (accuracy < min_accuracy) {
		fprintf(stderr, "digits: accuracy %.2f%% is below the required %.2f%%\n",
			accuracy, min_accuracy);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t image_bytes = 0, count = 0;
	unsigned char *raw_images = NULL, *labels = NULL;
	float *images = NULL;
	double min_accuracy = -1.0;
	int status = 2;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s IMAGES LABELS [MIN_ACCURACY_PERCENT]\n", argv[0]);
		return 2;
	}
	if (argc == 4) {
		char *end;
		min_accuracy = strtod(argv[3], &end);
		if (end == argv[3] || *end != '\0' || !(min_accuracy >= 0.0 && min_accuracy <= 100.0)) {
			fprintf(stderr, "digits: MIN_ACCURACY_PERCENT must be a number in 0..100, not '%s'\n",
				argv[3]);
			return 2;
		}
	}

	raw_images = read_file(argv[1], &image_bytes);
	if (raw_images)
		labels = read_file(argv[2], &count);
	if (!raw_images || !labels)
		goto out;
	if (count == 0) {
		fprintf(stderr, "digits: %s holds no labels\n", argv[2]);
		goto out;
	}
	if (image_bytes != count * PIXELS * 4) {
		fprintf(stderr, "digits: %s has %zu bytes, but %s has %zu labels: expected %zu bytes "
			"(%d float32 per image)\n", argv[1], image_bytes, argv[2], count,
			count * PIXELS * 4, PIXELS);
		goto out;
	}
	images = malloc(count * PIXELS * sizeof *images);
	if (!images) {
		fprintf(stderr, "digits: out of memory\n");
		goto out;
	}
	decode_floats(raw_images, images, count * PIXELS);
	status = evaluate(images, labels, count, min_accuracy);
out:
	free(images);
	free(raw_images);
	free(labels);
	return status;
}
