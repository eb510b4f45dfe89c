/* cmd_sample.c - stalelab sample: text from a language model's checkpoint.
 * The server's weights and the run's vocabulary are read back from the
 * checkpoint, the model rebuilt from its spec on the cpu backend (one
 * thread: the same bits for a seed), and bytes drawn one at a time: the
 * last T tokens forward, the logits at the last position over the
 * temperature, a softmax, a draw from a seeded stream. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "ckpt.h"
#include "cli.h"
#include "cmd_run.h"
#include "model.h"
#include "rng.h"
#include "run.h"

static const char sample_usage[] =
	"Usage: stalelab sample --resume CKPT [--tokens N] [--seed S]\n"
	"                       [--prompt TEXT] [--temperature T]\n"
	"\n"
	"Print text from the checkpoint of a language model's run (a gpt: on\n"
	"text, stalelab run --checkpoint-dir or a schedule's checkpoint): the\n"
	"prompt, then N bytes drawn one at a time. Each draw forwards the last T\n"
	"tokens (the model's context), divides the logits at the last position\n"
	"by the temperature and samples the softmax with a stream seeded by S,\n"
	"so a seed gives the same text. The vocabulary is the run's, kept in the\n"
	"checkpoint: every byte of the prompt must be in it.\n"
	"\n"
	"      --resume CKPT      the checkpoint (a file, or a --checkpoint-dir:\n"
	"                         its newest)\n"
	"      --tokens N         bytes to draw after the prompt (1 to 1000000,\n"
	"                         default 200)\n"
	"      --seed S           the sampling stream's seed (default 1)\n"
	"      --prompt TEXT      the text to go on from (default: a newline, or\n"
	"                         the vocabulary's first byte when it has none);\n"
	"                         printed first\n"
	"      --temperature T    > 0 and <= 100 (default 1: the model's own\n"
	"                         distribution; lower is more conservative)\n"
	"  -h, --help             this text\n"
	"\n"
	"Exit status: 0 text printed, 1 a runtime failure, 2 bad usage: an\n"
	"unreadable checkpoint, one of an image model, a prompt byte outside the\n"
	"vocabulary.\n";

#define SAMPLE_ERR(...) (fprintf(stderr, "stalelab sample: " __VA_ARGS__), 2)

typedef struct sample_opts {
	const char *resume, *prompt;
	unsigned long long tokens, seed;
	double temperature;
} sample_opts;

static int
sample_parse(int argc, char **argv, sample_opts *o)
{
	static const struct option opts[] = {
		{"resume", required_argument, NULL, 'r'},
		{"tokens", required_argument, NULL, 'n'},
		{"seed", required_argument, NULL, 's'},
		{"prompt", required_argument, NULL, 'p'},
		{"temperature", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char err[SL_ERR_LEN];
	*o = (sample_opts){.tokens = 200, .seed = 1, .temperature = 1};
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		int rc = 0;
		switch (c) {
		case 'h':
			fputs(sample_usage, stdout);
			return 1;
		case 'r':
			o->resume = optarg;
			break;
		case 'p':
			o->prompt = optarg;
			break;
		case 'n':
			rc = cli_opt_u64("tokens", optarg, 1, 1000000, &o->tokens, err);
			break;
		case 's':
			rc = cli_opt_u64("seed", optarg, 0, CLI_NO_MAX, &o->seed, err);
			break;
		case 't':
			rc = cli_opt_double("temperature", optarg,
					    (cli_range){0, 100, 1, "a temperature"}, &o->temperature,
					    err);
			break;
		default:
			return -cli_bad_option("sample", c, argv, opts);
		}
		if (rc < 0)
			return -cli_usage_error("sample", err);
	}
	if (optind < argc)
		return -SAMPLE_ERR("unexpected argument '%s'\nTry 'stalelab sample --help'.\n",
				   argv[optind]);
	if (!o->resume)
		return -SAMPLE_ERR("which checkpoint? (--resume CKPT)\n"
				   "Try 'stalelab sample --help'.\n");
	return 0;
}

/* the model of the checkpoint's run with its server weights, and its
 * vocabulary (id k is the byte vocab[k]); 0, 2 (refused) or 1 */
typedef struct sampler {
	run_config cfg;
	uint8_t vocab[256];
	int vocab_n, ctx;
	backend *be;
	model *m;
} sampler;

static int
sampler_open(sampler *s, const char *path, char *err)
{
	uint8_t *buf = NULL;
	size_t len = 0, n = 0;
	float *w = NULL;
	char newest[4096];
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (ckpt_dir_newest(path, newest, sizeof(newest), err) < 0)
			return SAMPLE_ERR("--resume: %s\n", err);
		path = newest;
	}
	if (ckpt_read(path, &buf, &len, &s->cfg, err) < 0 ||
	    run_checkpoint_vocab(buf, len, s->vocab, &s->vocab_n, err) < 0) {
		free(buf);
		/* ckpt_read's messages start with what reads it ("resume: ") */
		return SAMPLE_ERR("--resume: %s\n", strncmp(err, "resume: ", 8) ? err : err + 8);
	}
	s->ctx = model_spec_context(s->cfg.model);
	if (s->vocab_n == 0 || s->ctx <= 0) {
		free(buf);
		return SAMPLE_ERR("--resume: %s is a checkpoint of model %s on %s, not of a language "
				  "model: sample needs a gpt: model's run on text\n",
				  path, s->cfg.model, s->cfg.dataset);
	}
	int rc = run_checkpoint_weights(buf, len, &w, &n, err);
	free(buf);
	if (rc < 0)
		return SAMPLE_ERR("--resume: %s\n", err);
	if (backend_open("cpu", 1, &s->be, err) < 0 ||
	    model_new(s->cfg.model, 1, 1, s->ctx, s->vocab_n, 1, s->cfg.seed, s->be, &s->m,
		      err) < 0) {
		free(w);
		fprintf(stderr, "stalelab sample: %s\n", err);
		return 1;
	}
	if (s->m->n_params != n) {
		free(w);
		return SAMPLE_ERR("--resume: %s holds %zu weights, model %s has %zu\n", path, n,
				  s->cfg.model, s->m->n_params);
	}
	s->be->ops->upload(s->be, s->m->params, w, sizeof(float) * n);
	free(w);
	return 0;
}

static void
sampler_close(sampler *s)
{
	if (s->m)
		model_free(s->m);
	if (s->be)
		backend_free(s->be);
}

int
cmd_sample(int argc, char **argv)
{
	sample_opts o;
	int rc = sample_parse(argc, argv, &o);
	if (rc != 0)
		return rc > 0 ? 0 : -rc;
	char err[SL_ERR_LEN];
	sampler s = {0};
	if ((rc = sampler_open(&s, o.resume, err)) != 0) {
		sampler_close(&s);
		return rc;
	}
	int id_of[256];
	for (int b = 0; b < 256; b++)
		id_of[b] = -1;
	for (int k = 0; k < s.vocab_n; k++)
		id_of[s.vocab[k]] = k;
	char start[2] = {'\n', 0};
	if (id_of['\n'] < 0)
		start[0] = (char)s.vocab[0];
	const char *prompt = o.prompt ? o.prompt : start;
	size_t np = strlen(prompt), cap = np + o.tokens;
	int *ids = malloc(sizeof(int) * (cap ? cap : 1));
	if (!ids) {
		sampler_close(&s);
		fprintf(stderr, "stalelab sample: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < np; i++) {
		uint8_t b = (uint8_t)prompt[i];
		if ((ids[i] = id_of[b]) < 0) {
			rc = SAMPLE_ERR("--prompt: byte %zu, 0x%02x%s%c%s, is not in the "
					"checkpoint's vocabulary of %d bytes\n",
					i, b, b >= 0x20 && b < 0x7f ? " ('" : "",
					b >= 0x20 && b < 0x7f ? b : ' ',
					b >= 0x20 && b < 0x7f ? "')" : "", s.vocab_n);
			free(ids);
			sampler_close(&s);
			return rc;
		}
	}
	if (np == 0) {
		free(ids);
		sampler_close(&s);
		return SAMPLE_ERR("--prompt: empty (leave it out to start from a newline)\n");
	}
	rng g;
	rng_seed(&g, o.seed, 0);
	fwrite(prompt, 1, np, stdout);
	for (size_t i = np; i < cap; i++) {
		if ((ids[i] = model_sample_next(s.m, ids, i, o.temperature, &g)) < 0) {
			fprintf(stderr, "stalelab sample: out of memory\n");
			rc = 1;
			break;
		}
		putchar(s.vocab[ids[i]]);
	}
	if (isatty(STDOUT_FILENO))
		putchar('\n');
	free(ids);
	sampler_close(&s);
	return fflush(stdout) == 0 ? rc : 1;
}
