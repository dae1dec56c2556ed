#pragma once
#include <stdbool.h>

/* `csandbox run` (plan_only = false) and `csandbox plan`. */
int cmd_run(int argc, char **argv, bool plan_only);
