#pragma once

/* `csandbox doctor`: what this machine and user can run, each failure with its fix. */
int cmd_doctor(int argc, char **argv);
