/* cmd_bench.h - `stalelab bench`, and the measurements it shares between
 * the cpu figures (cmd_bench.c) and a device's (cmd_bench_device.c). */
#ifndef SL_CMD_BENCH_H
#define SL_CMD_BENCH_H

#include "dataset.h"
#include "model.h"

/* `stalelab bench` */
int cmd_bench(int argc, char **argv);

/* One worker's training, plain SGD at lr 0.05, the model's batch_cap per
 * step, for about `seconds` in windows of ~0.25 s: the median samples/s. */
double bench_measure(model *m, const dataset *tr, double seconds);
/* The parameter server alone on `device`: asgd pushes of a model-sized
 * gradient already in its memory; updates per second (0: not measured).
 * Prints its line and JSON unless quiet. */
double bench_ps_rate(model *m, const char *device, double seconds, int quiet);
/* The whole engine: asgd, nw workers of `batch` on `device`, wall clock,
 * no delay, for about `seconds`; prints its line and JSON. */
void bench_async_rate(const dataset_pair *d, const char *spec, const char *device, int batch,
		      int nw, double seconds);
/* The text a language model reads when the data given is not text. */
#define BENCH_TEXT "text:webster"

/* The data set model spec trains on: d itself, or for a language model
 * whose context d does not hold, text cut into its contexts (dspec when
 * it is text, else BENCH_TEXT), loaded into own (caller frees; zeroed
 * when unused). NULL with err saying why. */
const dataset_pair *bench_data_for(const char *spec, const char *dspec, const dataset_pair *d,
				   dataset_pair *own, char *err);
/* `stalelab bench --device NAME`: each model at each batch on the device
 * next to the cpu backend (threads; a language model's only at the first
 * batch), the fraction of the device's peak, tokens/s for a language
 * model, the server's update time, asgd with 1, 8, 64 workers (those that
 * fit BENCH_DEVICE_MEM). Each model on bench_data_for's data. 0, or the
 * exit status of a failure (its line printed). */
int bench_device(const char *device, const dataset_pair *d, const char *dspec,
		 const char *const *models, int n_models, const int *batches, int n_batches,
		 int threads, double seconds, int layers);
void bench_layers(model *m, double seconds, int team_threads, int sgemm_refs);

#endif
