/* cmd_cluster.h - `stalelab cluster` (the scheduler simulator) and
 * `stalelab cluster profile` (a model's schedules measured by the engine). */
#ifndef SL_CMD_CLUSTER_H
#define SL_CMD_CLUSTER_H

int cmd_cluster(int argc, char **argv);
int cmd_cluster_profile(int argc, char **argv);

#endif
