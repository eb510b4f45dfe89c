/* test_model_graph.c - models as graphs of nodes: the specs' nodes as
 * the layer list built them, the node builder's checks, outputs read more
 * than once (gradients summed), cut depths, the add op. The tests added
 * with tcase_add_loop_test run once per backend of DEVICES (model_util.h;
 * _i indexes it). */
#include <math.h>

#include "backend.h"
#include "graph_spec.h"
#include "model.h"
#include "model_util.h"
#include "testutil.h"

static uint64_t
fnv1a(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ULL;
	}
	return h;
}

START_TEST(specs_as_before)
{
	/* each spec's first ref step (seed 42, a fixed batch of 5): the
	 * parameters, gradients, loss and FLOPs the layer list gave before
	 * models were graphs (model.c at 9c8441c), bit for bit */
	static const struct {
		const char *spec;
		size_t n_params;
		uint64_t params, grads;
		double loss, flops;
	} want[] = {
		{"lenet5", 61706, 0x07c828a9c0547654ULL, 0x915009d8d52cfb31ULL,
		 2.6285778829293731, 2276528},
		{"mlp:784-256-10", 203530, 0xa092bf61ba8402dcULL, 0xbf9a7f03808b807cULL,
		 2.6640140447804037, 818176},
		{"logreg", 7850, 0x6741ef7f9a88f269ULL, 0x8562293f2bde557fULL,
		 2.5651220226360545, 31360},
	};
	static float x[5 * 784];
	uint8_t y[5];
	uint32_t idx[5];
	for (int i = 0; i < 5 * 784; i++)
		x[i] = (float)((i * 37) % 101) / 101.0f;
	for (int b = 0; b < 5; b++) {
		y[b] = (uint8_t)(b * 3 % 10);
		idx[b] = (uint32_t)b;
	}
	for (size_t s = 0; s < sizeof want / sizeof want[0]; s++) {
		backend *be = dev(1, 1);
		model *m;
		char err[SL_ERR_LEN];
		ck_assert_int_eq(model_new(want[s].spec, 1, 28, 28, 10, 5, 42, be, &m, err), 0);
		ck_assert_uint_eq(m->n_params, want[s].n_params);
		model_load_batch(m, x, y, idx, 5);
		double loss = model_step(m, NULL, 5, 0);
		ck_assert_msg(fnv1a(m->params, 4 * m->n_params) == want[s].params,
			      "%s: initial parameters differ", want[s].spec);
		ck_assert_msg(fnv1a(m->grads, 4 * m->n_params) == want[s].grads,
			      "%s: gradients differ", want[s].spec);
		ck_assert_msg(loss == want[s].loss, "%s: loss %.17g", want[s].spec, loss);
		ck_assert_double_eq(model_step_flops(m, 0), want[s].flops);
		model_free(m);
		backend_free(be);
	}
}
END_TEST

START_TEST(spec_nodes_layout)
{
	backend *be = cpu(1);
	model *m;
	char err[SL_ERR_LEN];
	/* mlp:784-256-10: two dense nodes, the relu fused into the first */
	ck_assert_int_eq(model_new("mlp:784-256-10", 1, 28, 28, 10, 2, 1, be, &m, err), 0);
	ck_assert_int_eq(m->n_nodes, 2);
	ck_assert_int_eq(m->n_param_layers, 2);
	ck_assert_ptr_eq(m->nodes[0].op, op_find("dense"));
	ck_assert_int_eq(m->nodes[0].n_in, 1);
	ck_assert_int_eq(m->nodes[0].inputs[0], -1);
	ck_assert_int_eq(m->nodes[1].inputs[0], 0);
	ck_assert(m->nodes[0].relu && m->nodes[0].he_init);
	ck_assert(!m->nodes[1].relu && !m->nodes[1].he_init);
	ck_assert_uint_eq(m->nodes[0].p_off, 0);
	ck_assert_uint_eq(m->nodes[1].p_off, 784 * 256 + 256);
	ck_assert_uint_eq(model_tail_offset(m, 1), 784 * 256 + 256);
	ck_assert_uint_eq(m->nodes[1].n_params, 256 * 10 + 10);
	ck_assert_int_eq(m->nodes[0].n_out, 1);
	ck_assert_uint_eq(m->n_state, 0);
	ck_assert_ptr_null(m->dsum[0]); /* no output read twice */
	model_free(m);
	/* lenet5: the ops in order, each reading the one before, and its
	 * five parameterised nodes' offsets */
	ck_assert_int_eq(model_new("lenet5", 1, 28, 28, 10, 2, 1, be, &m, err), 0);
	static const char *const ops[] = {"conv2d", "maxpool", "conv2d", "maxpool",
					  "flatten", "dense", "dense", "dense"};
	static const size_t offs[] = {0, 156, 156, 2572, 2572, 2572, 50692, 60856};
	ck_assert_int_eq(m->n_nodes, 8);
	for (int i = 0; i < 8; i++) {
		ck_assert_str_eq(m->nodes[i].op->name, ops[i]);
		ck_assert_int_eq(m->nodes[i].inputs[0], i - 1);
		ck_assert_uint_eq(m->nodes[i].p_off, offs[i]);
		ck_assert_int_eq(m->nodes[i].relu, i == 0 || i == 2 || i == 5 || i == 6);
	}
	model_free(m);
	/* a standalone relu is not fused, but its input gets He init */
	node_desc d[] = {L("dense", 9, 0, 0, 0), L("relu", 0, 0, 0, 0),
			 L("dense", 4, 0, 0, 0)};
	m = mk_model(d, 3, (shape){1, 1, 6, 0}, 4, 2, be);
	ck_assert(!m->nodes[0].relu && m->nodes[0].he_init);
	ck_assert(!m->nodes[2].he_init);
	model_free(m);
	ck_assert_int_eq(model_spec_param_layers("lenet5"), 5);
	ck_assert_int_eq(model_spec_param_layers("mlp:784-256-128-10"), 3);
	ck_assert_int_eq(model_spec_param_layers("logreg"), 1);
	ck_assert_int_eq(model_spec_param_layers("resnet"), -1);
	backend_free(be);
}
END_TEST

START_TEST(op_table_rows)
{
	int n = 0;
	for (int i = 0; op_table[i]; i++, n++) {
		const op_class *op = op_table[i];
		ck_assert_ptr_eq(op_find(op->name), op);
		ck_assert(op->n_in >= 1 && op->n_in <= OP_MAX_IN);
		ck_assert(op->setup && op->forward && op->backward);
	}
	ck_assert_int_eq(n, 15);
	ck_assert_ptr_null(op_find("conv3d"));
	ck_assert_ptr_null(op_find(NULL));
}
END_TEST

/* model_new_nodes must refuse d with an error containing want */
static void
refused(const node_desc *d, int n, shape in, int classes, const char *want)
{
	backend *be = cpu(1);
	model *m = (model *)1;
	char err[SL_ERR_LEN] = "";
	ck_assert_int_eq(model_new_nodes(d, n, in, classes, 2, 1, be, &m, err), -SL_EINVAL);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(err, want), "error \"%s\", expected \"%s\"", err, want);
	backend_free(be);
}

START_TEST(node_checks)
{
	shape in = {1, 1, 6, 0};
	/* a node reading a later node, itself, or below the input */
	node_desc later[] = {L("dense", 4, 0, 0, 0),
			     {.op = "relu", .n_in = 1, .inputs = {2}},
			     L("dense", 3, 0, 0, 0)};
	refused(later, 3, in, 3, "node 1 (relu) reads node 2:");
	node_desc self[] = {L("dense", 4, 0, 0, 0),
			    {.op = "relu", .n_in = 1, .inputs = {1}},
			    L("dense", 3, 0, 0, 0)};
	refused(self, 3, in, 3, "node 1 (relu) reads node 1:");
	node_desc below[] = {{.op = "dense", .units = 3, .n_in = 1, .inputs = {-2}}};
	refused(below, 1, in, 3, "node 0 (dense) reads node -2:");
	/* an unknown op, and none */
	node_desc unknown[] = {L("dense", 4, 0, 0, 0), L("conv3d", 3, 0, 0, 0)};
	refused(unknown, 2, in, 3, "node 1: unknown op \"conv3d\" (expected dense, conv2d");
	node_desc none[] = {{.units = 3}};
	refused(none, 1, in, 3, "node 0: unknown op \"\"");
	/* an add not told its two inputs, or told one */
	node_desc add0[] = {L("dense", 6, 0, 0, 0), L("add", 0, 0, 0, 0),
			    L("dense", 3, 0, 0, 0)};
	refused(add0, 3, in, 3, "node 1 (add) reads 2 inputs, not 0");
	node_desc add1[] = {L("dense", 6, 0, 0, 0), {.op = "add", .n_in = 1, .inputs = {0}},
			    L("dense", 3, 0, 0, 0)};
	refused(add1, 3, in, 3, "node 1 (add) reads 2 inputs, not 1");
	/* an add of two shapes */
	node_desc shapes[] = {L("dense", 5, 0, 0, 0),
			      {.op = "add", .n_in = 2, .inputs = {-1, 0}},
			      L("dense", 3, 0, 0, 0)};
	refused(shapes, 3, in, 3, "add of a 1x1x6 and a 5x1x1 output");
	/* an output nobody reads but the last */
	node_desc dead[] = {L("dense", 6, 0, 0, 0),
			    {.op = "dense", .units = 3, .n_in = 1, .inputs = {-1}}};
	refused(dead, 2, in, 3, "node 0 (dense): nothing reads its output");
	refused(dead, 0, in, 3, "model: no nodes");
	/* the sequential default still checks what it reads */
	node_desc flat[] = {L("dense", 6, 0, 0, 0), L("maxpool", 0, 2, 2, 0)};
	refused(flat, 2, in, 3, "maxpool needs a feature-map input");
}
END_TEST

/* Three graphs where an output is read more than once, on odd shapes. */
static model *
graph_model(int which, backend *be, int batch)
{
	if (which == 0) {
		/* a residual block of dense nodes: node 0 read by 1 and 2 */
		node_desc d[] = {L("dense", 5, 0, 0, 0), L("dense", 5, 0, 0, 0),
				 {.op = "add", .n_in = 2, .inputs = {0, 1}},
				 L("relu", 0, 0, 0, 0), L("dense", 3, 0, 0, 0)};
		d[0].relu = 1;
		return mk_model(d, 5, (shape){1, 1, 7, 0}, 3, batch, be);
	}
	if (which == 1) {
		/* conv maps: node 0 read three times; node 2 reads two
		 * outputs node 3 has already given gradients to (both sum
		 * buffers at once; add's two input gradients are equal, so
		 * this runs that path but cannot tell it from one buffer) */
		node_desc d[] = {L("conv2d", 3, 3, 1, 1), L("conv2d", 3, 3, 1, 1),
				 {.op = "add", .n_in = 2, .inputs = {1, 0}},
				 {.op = "add", .n_in = 2, .inputs = {1, 0}},
				 {.op = "add", .n_in = 2, .inputs = {2, 3}},
				 L("flatten", 0, 0, 0, 0), L("dense", 4, 0, 0, 0)};
		d[0].relu = 1;
		return mk_model(d, 7, (shape){2, 5, 7, 1}, 4, batch, be);
	}
	/* the model's input added in (no gradient to it), and a node added
	 * to itself (one node reading another twice) */
	node_desc d[] = {L("dense", 6, 0, 0, 0),
			 {.op = "add", .n_in = 2, .inputs = {-1, 0}},
			 {.op = "add", .n_in = 2, .inputs = {1, 1}},
			 L("dense", 3, 0, 0, 0)};
	d[0].relu = 1;
	return mk_model(d, 4, (shape){1, 1, 6, 0}, 3, batch, be);
}

START_TEST(fd_graphs)
{
	backend *be = dev(_i, 1);
	for (int g = 0; g < 3; g++) {
		model *m = graph_model(g, be, 5);
		ck_assert_ptr_nonnull(m->dsum[0]);
		ck_assert_ptr_nonnull(m->dsum[1]);
		/* the node read more than once, and how often */
		ck_assert_int_eq(m->nodes[g == 2].n_out, g == 1 ? 3 : 2);
		load_random(m, 5, 20 + (uint64_t)g);
		grad_check(m, 5, 0, 20 + (uint64_t)g);
		model_free(m);
	}
	backend_free(be);
}
END_TEST

START_TEST(graph_partial_depth)
{
	/* a residual graph's depth-k backward: the tail as the full one
	 * computes it, nothing below, and fewer FLOPs */
	backend *be = dev(_i, 1);
	model *m = graph_model(0, be, 4);
	ck_assert_int_eq(m->n_param_layers, 3);
	load_random(m, 4, 30);
	check_partial_depths(m, 4, 3);
	ck_assert_uint_eq(model_tail_offset(m, 1), m->nodes[4].p_off);
	ck_assert_uint_eq(model_tail_offset(m, 2), m->nodes[1].p_off);
	/* depth 2 stops at node 1: the add's and node 1's gradients toward
	 * node 0 are not computed */
	double f2 = model_step_flops(m, 2), f3 = model_step_flops(m, 3);
	ck_assert_double_eq_tol(f3 - f2, m->nodes[0].flops_bwd_w + m->nodes[1].flops_bwd_x +
				m->nodes[2].flops_bwd_x, 1e-9);
	node_info info[MODEL_MAX_NODES];
	ck_assert_int_eq(model_node_info(m, info, MODEL_MAX_NODES), 5);
	ck_assert_str_eq(info[2].name, "add");
	ck_assert_int_eq(info[2].param_index, -1);
	ck_assert_int_eq(info[4].param_index, 2);
	model_free(m);
	backend_free(be);
}
END_TEST

/* the cut depths of m, of its spec written as a graph, checked equal,
 * into got (at most 8) */
static int
cuts_both(const model *m, const node_desc *d, int n, int *got)
{
	char spec[1024] = GRAPH_PREFIX;
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(graph_spec_append(spec, sizeof spec, &d[i]), 0);
	int from_spec[8], k = model_cut_depths(m, got, 8);
	ck_assert_int_eq(model_spec_cut_depths(spec, from_spec, 8), k);
	ck_assert_mem_eq(got, from_spec, sizeof(int) * (size_t)k);
	return k;
}

START_TEST(cut_depths)
{
	/* sequential specs: every depth but full backprop's */
	const char *specs[] = {"logreg", "mlp:784-256-128-10", "lenet5"};
	const int layers[] = {1, 3, 5};
	int got[70];
	for (int s = 0; s < 3; s++) {
		int k = model_spec_cut_depths(specs[s], got, 70);
		ck_assert_int_eq(k, layers[s] - 1);
		for (int i = 0; i < k; i++)
			ck_assert_int_eq(got[i], i + 1);
	}
	ck_assert_int_eq(model_spec_cut_depths("nosuch", got, 70), -1);
	/* a block of two dense layers with a skip: 0, 1, 2 (dense), 3 add
	 * (2, 0), 4 dense. Depth 2 stops at node 2 with node 0's output
	 * crossing beside node 1's: no cut; depth 3 starts the block (node
	 * 0's output alone crosses, read twice) */
	backend *be = cpu(1);
	node_desc b[] = {L("dense", 5, 0, 0, 0), L("dense", 5, 0, 0, 0), L("dense", 5, 0, 0, 0),
			 {.op = "add", .n_in = 2, .inputs = {2, 0}}, L("dense", 3, 0, 0, 0)};
	b[0].relu = b[1].relu = 1;
	model *m = mk_model(b, 5, (shape){1, 1, 6, 0}, 3, 2, be);
	ck_assert_int_eq(cuts_both(m, b, 5, got), 2);
	ck_assert(got[0] == 1 && got[1] == 3);
	model_free(m);
	/* a boundary below the stop: 0 dense, 1 and 2 relus of it, 3 dense
	 * (reads 1), 4 add (3, 2), 5 dense. Depth 2 stops at node 3, where
	 * nodes 1 and 2 cross, as before node 2 (1 and 0); before node 1
	 * only node 0's output crosses: a cut */
	node_desc e[] = {L("dense", 5, 0, 0, 0), L("relu", 0, 0, 0, 0),
			 {.op = "relu", .n_in = 1, .inputs = {0}}, {.op = "dense", .n_in = 1, .inputs = {1}, .units = 5},
			 {.op = "add", .n_in = 2, .inputs = {3, 2}}, L("dense", 3, 0, 0, 0)};
	m = mk_model(e, 6, (shape){1, 1, 6, 0}, 3, 2, be);
	ck_assert_int_eq(cuts_both(m, e, 6, got), 2);
	ck_assert(got[0] == 1 && got[1] == 2);
	model_free(m);
	backend_free(be);
	/* more than max: the count, max written */
	ck_assert_int_eq(model_spec_cut_depths("mlp:784-256-128-10", got, 1), 2);
	ck_assert_int_eq(got[0], 1);
}
END_TEST

START_TEST(depths_str)
{
	char buf[64];
	const int r20[] = {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 38};
	ck_assert_str_eq(model_depths_str(r20, 11, buf, sizeof buf),
			 "1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 38");
	/* too long for 24 bytes: the run of one step shortened */
	ck_assert_str_eq(model_depths_str(r20, 11, buf, 24), "1, 5, ..., 37, 38");
	const int few[] = {1, 2, 3, 4, 9};
	ck_assert_str_eq(model_depths_str(few, 5, buf, 8), "1, 2, 3");
	ck_assert_str_eq(model_depths_str(few, 0, buf, 8), "");
}
END_TEST

START_TEST(add_forward_backward)
{
	/* y = a + b exactly; the backward hands dy to both inputs, summed
	 * with what node 0's other reader gives it */
	backend *be = dev(_i, 1);
	model *m = graph_model(2, be, 3);
	load_random(m, 3, 40);
	model_step(m, NULL, 3, 0);
	size_t n = 3 * 6, moved = 0;
	const float *x = m->act[0], *h = m->act[1], *s = m->act[2], *y = m->act[3];
	for (size_t i = 0; i < n; i++)
		moved += m->dact[3][i] != 0 && h[i] > 0;
	ck_assert_uint_gt(moved, 0);
	for (size_t i = 0; i < n; i++) {
		ck_assert(s[i] == x[i] + h[i]);
		ck_assert(y[i] == s[i] + s[i]);
	}
	/* node 2 reads node 1 twice: d(node 1) = 2 dy; node 1 hands that to
	 * node 0 (whose backward then masks it by its fused relu, in place) */
	for (size_t i = 0; i < n; i++) {
		ck_assert(m->dact[2][i] == m->dact[3][i] + m->dact[3][i]);
		ck_assert(m->dact[1][i] == (h[i] > 0 ? m->dact[2][i] : 0.0f));
	}
	model_free(m);
	backend_free(be);
}
END_TEST

static Suite *
model_graph_suite(void)
{
	Suite *s = suite_create("model_graph");
	TCase *gr = tcase_create("graph");
	tcase_set_timeout(gr, 60);
	tcase_add_test(gr, specs_as_before);
	tcase_add_test(gr, spec_nodes_layout);
	tcase_add_test(gr, op_table_rows);
	tcase_add_test(gr, node_checks);
	tcase_add_loop_test(gr, fd_graphs, 0, N_DEVICES);
	tcase_add_loop_test(gr, graph_partial_depth, 0, N_DEVICES);
	tcase_add_test(gr, cut_depths);
	tcase_add_test(gr, depths_str);
	tcase_add_loop_test(gr, add_forward_backward, 0, N_DEVICES);
	suite_add_tcase(s, gr);
	return s;
}

SL_TEST_MAIN(model_graph_suite)
