/* tui.h - `stalelab tui`: the terminal front end, a client of the daemon's
 * nanomsg bus (docs/tui.md). It includes nothing from engine/ or daemon/;
 * the binary's main only dispatches to it. */
#ifndef SL_TUI_H
#define SL_TUI_H

/* Returns the exit code: 0 success (q), 1 runtime failure, 2 bad usage. */
int cmd_tui(int argc, char **argv);

#endif
