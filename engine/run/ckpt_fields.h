/* ckpt_fields.h - checkpoint field tables (private to checkpoint.c,
 * ckpt_read.c, ckpt_fields.c and ckpt_ledger.c, the run's checkpoint: part
 * of the run, since it writes and reads the run's private state,
 * run_impl.h). */
#ifndef SL_CKPT_FIELDS_H
#define SL_CKPT_FIELDS_H

#include "run_impl.h"
#include "tlv.h"

typedef enum ftype {
	F_INT,  /* signed integer of the member's size (stored i64) */
	F_UINT, /* unsigned integer of the member's size (stored u64) */
	F_F64,
	F_STR,  /* char array (stored without its NUL) */
	F_U64A, /* uint64_t array of the member's size */
	F_SUB,  /* a struct with its own table (a section) */
	F_ENUM, /* an int enum, stored by name */
	F_FLAGS /* an unsigned bit set, stored as comma-separated names */
} ftype;

enum { OPT = 0, REQ = 1 }; /* a field may be absent / must be there */

typedef struct ftable ftable;

typedef struct field {
	const char *name;
	ftype type;
	size_t off, size;
	int req;             /* refused when absent; else left at its default */
	const ftable *sub;   /* F_SUB */
	const char *(*label)(int); /* F_ENUM, F_FLAGS: the name of a value or bit */
	int n_labels;
} field;

struct ftable {
	const field *f;
	int n;
};

extern const ftable ckpt_config_tab, ckpt_override_tab, ckpt_run_tab, ckpt_eval_tab,
	ckpt_event_tab, ckpt_sched_tab, ckpt_held_tab, ckpt_worker_tab;

/* obj's members as fields of w's open section */
void ckpt_put_fields(tlv_w *w, const ftable *t, const void *obj);
/* fields of s into obj's members (absent optional ones untouched) */
int ckpt_get_fields(const tlv_sec *s, const ftable *t, void *obj, char *err);
/* the table's members from src into dst (other members untouched) */
void ckpt_copy_fields(const ftable *t, void *dst, const void *src);

/* the run's ledger of remote pushes (ckpt_ledger.c): written when l is
 * not NULL; read into a new one (*out, NULL when the file has none):
 * 1, 0 when absent, or < 0 with err naming the field */
void ckpt_put_ledger(tlv_w *w, const ledger *l);
int ckpt_get_ledger(const tlv_sec *root, ledger **out, char *err);

#endif
