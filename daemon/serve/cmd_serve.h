/* cmd_serve.h - `stalelab serve`: the daemon (HTTP, the bus, remote
 * workers). */
#ifndef SL_CMD_SERVE_H
#define SL_CMD_SERVE_H

int cmd_serve(int argc, char **argv);

#endif
