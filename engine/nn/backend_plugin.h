/* backend_plugin.h - the interface between the binary and a backend built
 * as a plugin (a shared object the registry loads with dlopen: the cuda
 * backend, engine/cuda/). The plugin exports one C symbol, SL_PLUGIN_INIT,
 * a function that returns its table. The binary refuses a table whose
 * api_version or ops_size differs from its own, so a plugin built from
 * another revision never runs. Everything else crosses as backend_ops
 * (backend.h). Plain C, included by the plugin's C++ as well. */
#ifndef SL_BACKEND_PLUGIN_H
#define SL_BACKEND_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend.h"

#define SL_PLUGIN_API 1
#define SL_PLUGIN_INIT "sl_plugin_init"

typedef struct sl_plugin {
	int api_version;  /* SL_PLUGIN_API */
	size_t ops_size;  /* sizeof(backend_ops) as the plugin was built */
	const char *name; /* the class's name: "cuda" */
	/* Can it run here? The number of usable devices (> 0), or 0 with why
	 * (len bytes) saying why not in words: no driver, a driver older
	 * than the runtime, no visible device. Touches no library beyond
	 * the runtime's version and device queries. */
	int (*score)(char *why, size_t len);
	/* open on the first device, with its own stream; 0 or -SL_E* */
	int (*open)(int nthreads, backend **out);
} sl_plugin;

typedef const sl_plugin *(*sl_plugin_init_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
