/* table.c - the ops: one row per op. A new op is a file in this folder,
 * its declaration in ops.h and a row here. */
#include <string.h>

#include "ops.h"

const op_class *const op_table[] = {
	&op_dense,
	&op_conv2d,
	&op_maxpool,
	&op_relu,
	&op_flatten,
	&op_add,
	&op_batchnorm,
	&op_avgpool,
	&op_shortcut,
	&op_embed,
	&op_layernorm,
	&op_linear,
	&op_gelu,
	&op_attention,
	&op_lmhead,
	NULL,
};

const op_class *
op_find(const char *name)
{
	if (!name)
		return NULL;
	for (int i = 0; op_table[i]; i++)
		if (!strcmp(name, op_table[i]->name))
			return op_table[i];
	return NULL;
}
