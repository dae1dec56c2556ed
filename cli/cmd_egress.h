/* csandbox egress-log PROFILE: the refusals of the profile's last allowlist session. */
#pragma once

int cmd_egress_log(int argc, char **argv);
