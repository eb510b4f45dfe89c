/* cmd_bench_device.c - `stalelab bench --device NAME`: the figures of a
 * device backend (cuda), each next to the cpu backend's measured in the
 * same run: samples/s of one worker per model and batch (tokens/s for a
 * language model, which reads its own text: bench_data_for), the TFLOP/s
 * that is and the fraction of the device's FP32 peak (computed from what
 * the device reports), the server's time per update, and asgd with 1, 8
 * and 64 workers, one stream each. */
#include <stdio.h>
#include <string.h>

#include "model.h"

#include "cmd_bench.h"

/* one worker of spec at batch B on be: samples/s, or -1 (printed) */
static double
one_worker(backend *be, const dataset_pair *d, const char *spec, int B, double seconds)
{
	model *m;
	char err[SL_ERR_LEN];
	if (model_new(spec, d->train.c, d->train.h, d->train.w, d->train.classes, B, 1, be, &m,
		      err) < 0) {
		fprintf(stderr, "stalelab bench: %s\n", err);
		return -1;
	}
	double sps = bench_measure(m, &d->train, seconds);
	model_free(m);
	return sps;
}

/* The device memory the asgd rounds may fill with their workers' models:
 * a count of workers whose models would pass it is left out, said so
 * (64 copies of gpt:L6-H6-E384-T256 at batch 64 would want 400 GiB). */
#define BENCH_DEVICE_MEM ((double)(32ull << 30))

int
bench_device(const char *device, const dataset_pair *d, const char *dspec,
	     const char *const *models, int n_models, const int *batches, int n_batches,
	     int threads, double seconds, int layers)
{
	backend *dev, *cpu;
	char err[SL_ERR_LEN], about[256] = "";
	if (backend_open(device, 1, &dev, err) < 0) {
		fprintf(stderr, "stalelab bench: %s\n", err);
		return 2;
	}
	if (backend_open("cpu", threads, &cpu, err) < 0) {
		fprintf(stderr, "stalelab bench: %s\n", err);
		backend_free(dev);
		return 1;
	}
	if (dev->ops->describe)
		dev->ops->describe(dev, about, sizeof(about));
	double peak = dev->ops->peak_gflops ? dev->ops->peak_gflops(dev) : 0;
	printf("%s%s%s", backend_name(dev), about[0] ? ": " : "", about);
	if (peak > 0)
		printf("; FP32 peak %.1f TFLOP/s (multiprocessors x lanes x 2 x clock)\n",
		       peak * 1e-3);
	else
		printf(" (it reports no peak)\n");
	printf("{\"bench\":\"device\",\"device\":\"%s\",\"about\":\"%s\",\"peak_gflops\":%.1f}\n",
	       backend_name(dev), about, peak);
	int code = 0;
	for (int i = 0; i < n_models && !code; i++) {
		dataset_pair own;
		const dataset_pair *md = bench_data_for(models[i], dspec, d, &own, err);
		if (!md) {
			fprintf(stderr, "stalelab bench: %s\n", err);
			code = 2;
			break;
		}
		const int lm = model_spec_context(models[i]) > 0;
		double mem0 = 0; /* a worker's model at the first batch */
		for (int b = 0; b < n_batches; b++) {
			const int B = batches[b];
			/* a language model's step on the cpu takes seconds: its
			 * figure at the first batch only */
			const int with_cpu = !lm || b == 0;
			double sd = one_worker(dev, md, models[i], B, seconds);
			double sc = with_cpu ? one_worker(cpu, md, models[i], B, seconds) : 0;
			if (sd < 0 || sc < 0) {
				code = 2;
				break;
			}
			model *m; /* for the step's FLOPs and memory (in the device's) */
			if (model_new(models[i], md->train.c, md->train.h, md->train.w,
				      md->train.classes, B, 1, dev, &m, err) < 0) {
				code = 2;
				break;
			}
			if (b == 0)
				mem0 = (double)m->mem_bytes;
			double gf = sd * model_step_flops(m, 0) * 1e-9;
			char of_peak[32] = "", cpu_fig[64] = "   cpu: at the first batch only";
			if (peak > 0)
				snprintf(of_peak, sizeof(of_peak), " (%.1f%% of peak)", 100 * gf / peak);
			if (with_cpu)
				snprintf(cpu_fig, sizeof(cpu_fig), "   cpu %2d thr %9.0f samples/s   ratio %.1f",
					 threads, sc, sc > 0 ? sd / sc : 0);
			printf("%-20s batch %-4d %s %10.0f samples/s %7.3f TFLOP/s%s%s\n", models[i], B,
			       backend_name(dev), sd, gf * 1e-3, of_peak, cpu_fig);
			if (m->targets > 1) { /* a language model: a sample is T tokens */
				printf("%-20s batch %d x %d tokens: %.0f tokens/s on %s", "", B,
				       m->targets, sd * m->targets, backend_name(dev));
				if (with_cpu)
					printf(", %.0f on the cpu", sc * m->targets);
				printf("\n");
			}
			printf("{\"bench\":\"device_train\",\"device\":\"%s\",\"model\":\"%s\","
			       "\"batch\":%d,\"samples_per_s\":%.1f,\"tokens_per_s\":%.1f,"
			       "\"gflops\":%.2f,\"peak_gflops\":%.1f,\"cpu_threads\":%d,"
			       "\"cpu_samples_per_s\":%.1f,\"ratio\":%.3f}\n",
			       backend_name(dev), m->spec, B, sd, sd * m->targets, gf, peak, threads, sc,
			       sc > 0 ? sd / sc : 0);
			if (b == 0) {
				double ups = bench_ps_rate(m, device, seconds, 1);
				printf("%-20s the server's update on %s: %.4f ms (%.0f updates/s)\n", "",
				       backend_name(dev), ups > 0 ? 1e3 / ups : 0, ups);
				printf("{\"bench\":\"device_ps_apply\",\"device\":\"%s\",\"model\":\"%s\","
				       "\"updates_per_s\":%.1f}\n", backend_name(dev), m->spec, ups);
			}
			model_free(m);
			if (layers && model_new(models[i], md->train.c, md->train.h, md->train.w,
						md->train.classes, B, 1, dev, &m, err) == 0) {
				bench_layers(m, seconds, 1, 0);
				model_free(m);
			}
			fflush(stdout);
		}
		/* many workers on one device, a stream each, as many as fit */
		for (int nw = 1; nw <= 64 && !code; nw *= 8) {
			if (nw * mem0 > BENCH_DEVICE_MEM) {
				printf("  asgd %d workers: left out (%d models of %.0f MiB at batch %d "
				       "would pass the %.0f GiB this bench allows)\n", nw, nw,
				       mem0 / (1 << 20), batches[0], BENCH_DEVICE_MEM / (1 << 30));
				continue;
			}
			bench_async_rate(md, models[i], device, batches[0], nw, seconds);
		}
		ds_pair_free(&own);
	}
	backend_free(cpu);
	backend_free(dev);
	return code;
}
