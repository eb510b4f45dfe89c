/* cmd_worker.h - `stalelab worker`: a remote worker process. */
#ifndef SL_CMD_WORKER_H
#define SL_CMD_WORKER_H

int cmd_worker(int argc, char **argv);

#endif
