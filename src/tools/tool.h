/* SPDX-License-Identifier: MIT */
/* tool.h - the shunt command: run, ss, bench. */
#ifndef SHUNT_TOOL_H
#define SHUNT_TOOL_H
int cmd_run(int argc, char **argv);
int cmd_ss(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_bench_worker(int argc, char **argv);
/* Directory holding the shunt binary (and libshunt.so beside it). */
const char *tool_dir(void);
/* The rendezvous directory as the shim would compute it. */
const char *tool_shunt_dir(void);
#endif
