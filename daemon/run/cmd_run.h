/* cmd_run.h - `stalelab run`: a headless run (exit status as cli.h says;
 * 3 diverged, 130/143 interrupted). */
#ifndef SL_CMD_RUN_H
#define SL_CMD_RUN_H

int cmd_run(int argc, char **argv);
/* stalelab sample: text from a language model's checkpoint (cmd_sample.c) */
int cmd_sample(int argc, char **argv);

#endif
