/*
 * collar's tools: the libcollar.so their messages name (what to put in
 * LD_PRELOAD).
 */
#ifndef COLLAR_TOOLS_LIBPATH_H
#define COLLAR_TOOLS_LIBPATH_H

#include <stddef.h>

/*
 * The library in force for this tool: the libcollar.so loaded in this
 * process (collar-tune under LD_PRELOAD), else the one that comes with
 * this program (the build tree's src/.libs/ beside src/collar-info, or
 * lib/ beside an installation's bin/, wherever it was moved), else the
 * configured $libdir's.
 */
void collar_tool_library_path(char *buf, size_t len);

#endif /* COLLAR_TOOLS_LIBPATH_H */
