/* fields.h - one description of every field of the run object: its key,
 * type, range (with open or closed ends), default, whether it may change
 * mid-run, a line of documentation, and where it lives in run_config and
 * run_cmd. Parsing (daemon/formats/config_json.c), validation (config_validate,
 * the run's command checks), PATCH bodies, the config echoed in /status and
 * the log, and GET /api/v1/schema are all driven by these tables; nothing
 * else writes a field's range down.
 *
 * Plain data and a few pure functions: the engine never sees JSON. */
#ifndef SL_FIELDS_H
#define SL_FIELDS_H

#include <stddef.h>

#include "config.h"
#include "rule.h"
#include "run.h"

/* The type a client sees (GET /api/v1/schema "type"). */
typedef enum field_type {
	FT_NUMBER,
	FT_INTEGER,
	FT_STRING,
	FT_BOOLEAN,
	FT_OBJECT,
	FT_ARRAY,
} field_type;

/* How the value is kept in the C struct. */
typedef enum field_store {
	FS_NONE,   /* not stored directly (objects, arrays, handled by key) */
	FS_DBL,    /* double */
	FS_INT,    /* int */
	FS_U64,    /* uint64_t */
	FS_BOOL,   /* int, 0 or 1 */
	FS_STR,    /* char[size] */
	FS_ENUM,   /* int: the index of the string among the choices */
} field_store;

enum {
	FD_MIN = 1 << 0,       /* bounded below by min */
	FD_MAX = 1 << 1,       /* bounded above by max */
	FD_MIN_OPEN = 1 << 2,  /* min itself excluded */
	FD_MAX_OPEN = 1 << 3,  /* max itself excluded */
	FD_MUTABLE = 1 << 4,   /* may change mid-run (PATCH, schedule) */
	FD_SPARSE = 1 << 5,    /* echoed only when not at its default */
	FD_NODEFAULT = 1 << 6, /* no default worth showing */
	FD_NOECHO = 1 << 7,    /* never echoed in a change record */
};

typedef struct field_table field_table;

typedef struct field_desc {
	const char *key;
	field_type type;
	field_store store;
	size_t off;            /* in the struct the table describes; objects:
				* where their fields' struct starts */
	size_t size;           /* FS_STR: buffer size (with the NUL) */
	double min, max;
	unsigned flags;
	/* strings with a fixed set of values: choices[i * stride] up to a
	 * NULL (stride sizeof(char *) for a plain array) */
	const void *choices;
	size_t stride;
	const char *(*choice_fn)(int i); /* instead: the i-th or NULL */
	/* values also accepted but never listed (the device field's refdev,
	 * for tests): the i-th or NULL; their index is -2 - i */
	const char *(*hidden_fn)(int i);
	double def;            /* numbers, booleans, FS_ENUM's index */
	const char *def_str;   /* FS_STR */
	/* checked and echoed only while sibling when_key's FS_ENUM value is in
	 * when_mask (1 << index); when_key NULL: always */
	const char *when_key;
	unsigned when_mask;
	unsigned cmd;          /* run_cmd's CMD_* bit (mutable fields) */
	size_t cmd_off;        /* where the value goes in run_cmd */
	unsigned echo;         /* CMD_* bits that put it in a change record
				* (0: cmd) */
	long has_off;          /* worker_override's has_* flag, or -1 */
	const field_table *sub; /* objects: their fields; arrays: an element's */
	const char *doc;
} field_desc;

struct field_table {
	const field_desc *f;
	int n;
};

/* The run object (run_config), in the order of docs/api.md. */
extern const field_table fields_run;
/* delay objects (delay_cfg) */
extern const field_table fields_delay;
extern const field_table fields_link;
/* lr_schedule objects (lr_sched) */
extern const field_table fields_sched;
/* stop (fields of run_config) */
extern const field_table fields_stop;
/* rule_params (rule_params): the union of every rule's parameters; which
 * rule reads which is the rule classes' list (rule.h) */
extern const field_table fields_rule_params;
/* one worker_overrides entry (worker_override): id and fields_worker */
extern const field_table fields_override;
/* PATCH /api/v1/workers/{id} (worker_override / run_cmd) */
extern const field_table fields_worker;
/* PATCH /api/v1/run keys that are not config fields: paused, stop,
 * checkpoint (run_cmd) */
extern const field_table fields_controls;

const field_desc *fields_find(const field_table *t, const char *key);

/* The key of the field a run_cmd bit (one CMD_* bit) changes, from the
 * tables above (the run's, its controls', a worker's): "lr" for CMD_LR;
 * NULL for a bit no field has. The one name of a change, wherever it is
 * written (a checkpoint's queued commands, ...). */
const char *fields_cmd_key(unsigned bit);

/* The i-th choice of a string field, or NULL past the last. */
const char *field_choice(const field_desc *f, int i);
/* Index of s among the choices, or -1. */
int field_choice_index(const field_desc *f, const char *s);
/* "a, b, c" into buf */
void field_choices_str(const field_desc *f, char *buf, size_t cap);

/* The range as people write it: "(0, 100]", "[1, 65536]", ">= 0", "any". */
void field_range_str(const field_desc *f, char *buf, size_t cap);

/* 1 if d is in the field's range (integers: and integral). */
int field_in_range(const field_desc *f, double d);

/* "path: must be in (0, 100], got -1" (returns -SL_EINVAL). */
int field_range_fail(const field_desc *f, const char *path, double got,
		     char *err);

/* Numeric value of a stored FS_DBL/INT/U64/BOOL/ENUM field at base. */
double field_get(const field_desc *f, const void *base);
void field_set(const field_desc *f, void *base, double d);

/* 1 if the field applies to the struct at base (its when_key holds). */
int field_applies(const field_desc *f, const field_table *t, const void *base);

/* Defaults of every stored field of t (recursively) into base. */
void fields_defaults(const field_table *t, void *base);

/* Check every stored field of t at base (recursively, fields that apply
 * only); path prefixes the names ("delay", "worker_overrides[2]"). */
int fields_validate(const field_table *t, const void *base, const char *path,
		    char *err);

/* Check the fields a change sets (c->fields), wherever they come from. */
int fields_check_cmd(const run_cmd *c, char *err);

/* Parameterised layers of a model spec ("mlp:784-256-10": 2), or -1 when
 * the spec is unknown. */
int fields_model_layers(const char *spec);
/* Its cut depths (model_spec_cut_depths, model.h) into depths[0..max);
 * their count, or -1 when the spec is unknown. */
int fields_model_cuts(const char *spec, int *depths, int max);

#endif
