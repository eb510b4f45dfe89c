/* test_model.c - finite-difference gradient checks for every op and
 * whole models, partial depth, thread-count invariance, loss arithmetic,
 * spec errors and cost accounting. Graphs of nodes are test_model_graph.c.
 * The tests added with tcase_add_loop_test run once per backend of DEVICES
 * (model_util.h; _i indexes it). */
#include <math.h>

#include "backend.h"
#include "dataset.h"
#include "model.h"
#include "model_util.h"
#include "testutil.h"

START_TEST(fd_dense)
{
	backend *be = dev(_i, 1);
	node_desc d[] = {L("dense", 5, 0, 0, 0)};
	model *m = mk_model(d, 1, (shape){1, 1, 7, 0}, 5, 4, be);
	load_random(m, 4, 1);
	grad_check(m, 4, 0, 1);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(fd_dense_relu_standalone)
{
	backend *be = dev(_i, 1);
	node_desc d[] = {L("dense", 9, 0, 0, 0), L("relu", 0, 0, 0, 0),
		     L("dense", 4, 0, 0, 0)};
	model *m = mk_model(d, 3, (shape){1, 1, 6, 0}, 4, 5, be);
	ck_assert_int_eq(m->n_nodes, 3); /* not fused */
	load_random(m, 5, 2);
	grad_check(m, 5, 0, 2);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(fd_mlp_fused)
{
	backend *be = dev(_i, 2);
	model *m;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(model_new("mlp:12-16-8-3", 1, 1, 12, 3, 6, 5, be, &m, err), 0);
	ck_assert_int_eq(m->n_nodes, 3); /* relus fused */
	ck_assert(m->nodes[0].relu && m->nodes[1].relu && !m->nodes[2].relu);
	load_random(m, 6, 3);
	grad_check(m, 6, 0, 3);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(fd_conv_multichannel)
{
	/* cin = 2 takes the im2col path; pad 1 exercises the borders */
	backend *be = dev(_i, 1);
	node_desc d[] = {L("conv2d", 3, 3, 1, 1), L("relu", 0, 0, 0, 0),
		     L("flatten", 0, 0, 0, 0), L("dense", 4, 0, 0, 0)};
	model *m = mk_model(d, 4, (shape){2, 5, 6, 1}, 4, 3, be);
	load_random(m, 3, 4);
	grad_check(m, 3, 0, 4);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(fd_conv_stride2)
{
	backend *be = dev(_i, 2);
	node_desc d[] = {L("conv2d", 4, 3, 1, 0), L("conv2d", 3, 3, 2, 1),
		     L("flatten", 0, 0, 0, 0), L("dense", 3, 0, 0, 0)};
	model *m = mk_model(d, 4, (shape){2, 9, 8, 1}, 3, 4, be);
	load_random(m, 4, 5);
	grad_check(m, 4, 0, 5);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(fd_conv_direct_and_pool)
{
	/* cin = 1 first layer: the direct kernel; then a conv whose dx runs
	 * through col2im, and two max pools (k2 s2; k3 s2 pad 1) */
	backend *be = dev(_i, 2);
	node_desc d[] = {L("conv2d", 3, 5, 1, 2), L("relu", 0, 0, 0, 0),
		     L("maxpool", 0, 2, 2, 0), L("conv2d", 4, 3, 1, 0),
		     L("relu", 0, 0, 0, 0), L("maxpool", 0, 3, 2, 1),
		     L("flatten", 0, 0, 0, 0), L("dense", 5, 0, 0, 0)};
	model *m = mk_model(d, 8, (shape){1, 12, 12, 1}, 5, 4, be);
	load_random(m, 4, 6);
	grad_check(m, 4, 0, 6);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(fd_lenet5)
{
	backend *be = dev(_i, 2);
	model *m;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(model_new("lenet5", 1, 28, 28, 10, 3, 7, be, &m, err), 0);
	ck_assert_uint_eq(m->n_params, 61706); /* the classic LeNet-5 count */
	ck_assert_int_eq(m->n_param_layers, 5);
	load_random(m, 3, 7);
	grad_check(m, 3, 400, 7);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(partial_depth_matches_full)
{
	backend *be = dev(_i, 1);
	model *m;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(model_new("lenet5", 1, 28, 28, 10, 4, 8, be, &m, err), 0);
	load_random(m, 4, 8);
	check_partial_depths(m, 4, 5);
	/* tail of depth 1 is the last dense layer: 84*10 + 10 parameters */
	ck_assert_uint_eq(m->n_params - model_tail_offset(m, 1), 850);
	ck_assert(model_step_flops(m, 1) < model_step_flops(m, 5));
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(threads_agree)
{
	/* the same step on 1 and 2 threads gives the same gradients (up to
	 * summation order in the conv weight reduction) */
	const char *specs[] = {"lenet5", "mlp:784-64-10"};
	for (int s = 0; s < 2; s++) {
		backend *b1 = cpu(1), *b2 = cpu(2);
		model *m1, *m2;
		char err[SL_ERR_LEN];
		ck_assert_int_eq(model_new(specs[s], 1, 28, 28, 10, 16, 9, b1, &m1, err), 0);
		ck_assert_int_eq(model_new(specs[s], 1, 28, 28, 10, 16, 9, b2, &m2, err), 0);
		load_random(m1, 16, 10);
		load_random(m2, 16, 10);
		double l1 = model_step(m1, NULL, 16, 0), l2 = model_step(m2, NULL, 16, 0);
		ck_assert_double_eq_tol(l1, l2, 1e-6);
		for (size_t i = 0; i < m1->n_params; i++)
			ck_assert_msg(fabsf(m1->grads[i] - m2->grads[i]) <=
					      1e-5f + 1e-4f * fabsf(m1->grads[i]),
				      "%s param %zu: %g vs %g", specs[s], i,
				      (double)m1->grads[i], (double)m2->grads[i]);
		model_free(m1);
		model_free(m2);
		backend_free(b1);
		backend_free(b2);
	}
}
END_TEST

START_TEST(softmax_xent_values)
{
	backend *be = dev(_i, 1);
	float z[] = {0, 0, 0, 1, 2, 3};
	uint8_t y[] = {1, 2};
	float d[6];
	int hits;
	double loss = be->ops->softmax_xent(be, z, y, d, 2, 3, &hits);
	double l0 = log(3.0);
	double l1 = log(exp(1) + exp(2) + exp(3)) - 3;
	ck_assert_double_eq_tol(loss, (l0 + l1) / 2, 1e-12);
	ck_assert_int_eq(hits, 1); /* row 0 ties to class 0; row 1 hits */
	for (int r = 0; r < 2; r++) {
		double s = d[r * 3] + d[r * 3 + 1] + d[r * 3 + 2];
		ck_assert_double_eq_tol(s, 0.0, 1e-7);
	}
	ck_assert_double_eq_tol(d[1], (1.0 / 3 - 1) / 2, 1e-7);
	backend_free(be);
}
END_TEST

START_TEST(sgd_arithmetic)
{
	backend *be = dev(_i, 1);
	float w[] = {1, 2}, g[] = {0.5f, -1}, m[] = {0, 0};
	be->ops->sgd(be, w, g, NULL, 2, 0.1f, 0, 0);
	ck_assert_float_eq_tol(w[0], 0.95f, 1e-7);
	ck_assert_float_eq_tol(w[1], 2.1f, 1e-7);
	/* momentum 0.9, weight decay 0.01: g' = g + wd w; m = mu m + g'; w -= lr m */
	float w2[] = {1}, g2[] = {0.5f};
	be->ops->sgd(be, w2, g2, m, 1, 0.1f, 0.9f, 0.01f);
	ck_assert_float_eq_tol(m[0], 0.51f, 1e-7);
	ck_assert_float_eq_tol(w2[0], 1 - 0.051f, 1e-7);
	be->ops->sgd(be, w2, g2, m, 1, 0.1f, 0.9f, 0.01f);
	float gp = 0.5f + 0.01f * (1 - 0.051f);
	ck_assert_float_eq_tol(m[0], 0.9f * 0.51f + gp, 1e-6);
	backend_free(be);
}
END_TEST

START_TEST(spec_errors)
{
	backend *be = cpu(1);
	model *m;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(model_new("mlp:784-abc-10", 1, 28, 28, 10, 4, 1, be, &m, err), -SL_EINVAL);
	ck_assert_ptr_null(m);
	ck_assert_ptr_nonnull(strstr(err, "mlp:784-abc-10"));
	ck_assert_int_eq(model_new("mlp:100-10", 1, 28, 28, 10, 4, 1, be, &m, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "784 features"));
	ck_assert_int_eq(model_new("mlp:784-10-7", 1, 28, 28, 10, 4, 1, be, &m, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "10 classes"));
	ck_assert_int_eq(model_new("resnet", 1, 28, 28, 10, 4, 1, be, &m, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "unknown \"resnet\""));
	ck_assert_int_eq(model_new("lenet5", 1, 1, 20, 10, 4, 1, be, &m, err), -SL_EINVAL);
	ck_assert_int_eq(model_new("mlp:784-", 1, 28, 28, 10, 4, 1, be, &m, err), -SL_EINVAL);
	ck_assert_int_eq(model_new("mlp:784-0-10", 1, 28, 28, 10, 4, 1, be, &m, err), -SL_EINVAL);
	backend_free(be);
}
END_TEST

/* every named model of the schema's list is a spec the parser takes: a
 * form at its ends and one step in, and not between steps */
START_TEST(builtins_parse)
{
	char spec[64];
	int n = 0;
	for (const model_builtin *b = model_builtins; b->spec; b++, n++) {
		if (!b->arg) {
			ck_assert_msg(model_spec_param_layers(b->spec) > 0, "%s", b->spec);
			continue;
		}
		const char *at = strchr(b->spec, '<');
		ck_assert_ptr_nonnull(at);
		int vals[] = {b->min, b->min + b->step, b->max, b->min + 1, b->max + b->step};
		for (int i = 0; i < 5; i++) {
			snprintf(spec, sizeof(spec), "%.*s%d", (int)(at - b->spec), b->spec, vals[i]);
			ck_assert_msg((model_spec_param_layers(spec) > 0) == (i < 3), "%s", spec);
		}
	}
	ck_assert_int_eq(n, 6);
}
END_TEST

START_TEST(costs_and_layout)
{
	backend *be = cpu(1);
	model *m;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(model_new("mlp:784-256-128-10", 1, 28, 28, 10, 4, 1, be, &m, err), 0);
	ck_assert_uint_eq(m->n_params, 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
	double mac = 784.0 * 256 + 256.0 * 128 + 128.0 * 10;
	/* forward + weight gradients everywhere + input gradients above layer 1 */
	ck_assert_double_eq_tol(model_step_flops(m, 0),
				2 * mac + 2 * mac + 2 * (256.0 * 128 + 128.0 * 10), 1e-6);
	/* the backward alone: the step less the forward; top-1 computes only
	 * the last layer's weight gradient (about 0.5% of the full backward) */
	ck_assert_double_eq_tol(model_bwd_flops(m, 0), model_step_flops(m, 0) - 2 * mac, 1e-6);
	ck_assert_double_eq_tol(model_bwd_flops(m, 1), 2 * 128.0 * 10, 1e-6);
	ck_assert_double_eq_tol(model_step_flops(m, 1), 2 * mac + 2 * 128.0 * 10, 1e-6);
	node_info info[MODEL_MAX_NODES];
	int n = model_node_info(m, info, MODEL_MAX_NODES);
	ck_assert_int_eq(n, 3);
	ck_assert_uint_eq(info[1].p_off, 784 * 256 + 256);
	ck_assert_int_eq(info[2].param_index, 2);
	ck_assert_uint_eq(info[0].act_floats, 256);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(init_deterministic)
{
	backend *be = cpu(1);
	model *a, *b, *c;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(model_new("lenet5", 1, 28, 28, 10, 2, 42, be, &a, err), 0);
	ck_assert_int_eq(model_new("lenet5", 1, 28, 28, 10, 2, 42, be, &b, err), 0);
	ck_assert_int_eq(model_new("lenet5", 1, 28, 28, 10, 2, 43, be, &c, err), 0);
	ck_assert_mem_eq(a->params, b->params, sizeof(float) * a->n_params);
	ck_assert(memcmp(a->params, c->params, sizeof(float) * a->n_params) != 0);
	/* biases start at zero; He init has the right scale for conv1 */
	const node *l0 = &a->nodes[0];
	for (size_t i = l0->n_weights; i < l0->n_params; i++)
		ck_assert_float_eq(a->params[l0->p_off + i], 0.0f);
	double ss = 0;
	for (size_t i = 0; i < l0->n_weights; i++)
		ss += (double)a->params[i] * a->params[i];
	double sd = sqrt(ss / (double)l0->n_weights);
	ck_assert_msg(sd > 0.15 && sd < 0.4, "conv1 init sd %g, want ~sqrt(2/25)", sd);
	model_free(a);
	model_free(b);
	model_free(c);
	backend_free(be);
}
END_TEST

START_TEST(learns_synthetic)
{
	/* a few hundred SGD steps separate the synthetic mixture */
	char err[SL_ERR_LEN];
	dataset_pair d;
	ck_assert_int_eq(ds_load("synthetic:3000", 5, &d, err), 0);
	backend *be = dev(_i, 2);
	model *m;
	ck_assert_int_eq(model_new("mlp:784-32-10", d.train.c, d.train.h, d.train.w,
				   d.train.classes, 32, 5, be, &m, err), 0);
	double loss0, acc0, loss1, acc1;
	model_evaluate(m, NULL, &d.test, &loss0, &acc0);
	uint32_t idx[32];
	for (int step = 0; step < 300; step++) {
		for (int i = 0; i < 32; i++)
			idx[i] = (uint32_t)((step * 32 + i) % d.train.n);
		model_load_batch(m, d.train.x, d.train.y, idx, 32);
		model_step(m, NULL, 32, 0);
		be->ops->sgd(be, m->params, m->grads, NULL, m->n_params, 0.1f, 0, 0);
	}
	model_evaluate(m, NULL, &d.test, &loss1, &acc1);
	ck_assert_msg(acc1 > 0.9 && loss1 < loss0, "acc %g -> %g, loss %g -> %g",
		      acc0, acc1, loss0, loss1);
	model_free(m);
	backend_free(be);
	ds_pair_free(&d);
}
END_TEST

static Suite *
model_suite(void)
{
	Suite *s = suite_create("model");
	TCase *fd = tcase_create("finite_differences");
	/* fd_lenet5 alone took 16 s on a loaded 2-core machine: room for more */
	tcase_set_timeout(fd, 180);
	tcase_add_loop_test(fd, fd_dense, 0, N_DEVICES);
	tcase_add_loop_test(fd, fd_dense_relu_standalone, 0, N_DEVICES);
	tcase_add_loop_test(fd, fd_mlp_fused, 0, N_DEVICES);
	tcase_add_loop_test(fd, fd_conv_multichannel, 0, N_DEVICES);
	tcase_add_loop_test(fd, fd_conv_stride2, 0, N_DEVICES);
	tcase_add_loop_test(fd, fd_conv_direct_and_pool, 0, N_DEVICES);
	tcase_add_loop_test(fd, fd_lenet5, 0, N_DEVICES);
	suite_add_tcase(s, fd);
	TCase *tc = tcase_create("model");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, partial_depth_matches_full, 0, N_DEVICES);
	tcase_add_test(tc, threads_agree);
	tcase_add_loop_test(tc, softmax_xent_values, 0, N_DEVICES);
	tcase_add_loop_test(tc, sgd_arithmetic, 0, N_DEVICES);
	tcase_add_test(tc, spec_errors);
	tcase_add_test(tc, builtins_parse);
	tcase_add_test(tc, costs_and_layout);
	tcase_add_test(tc, init_deterministic);
	tcase_add_loop_test(tc, learns_synthetic, 0, N_DEVICES);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(model_suite)
