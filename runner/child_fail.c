/* The set-up's error channel: a child of the launch (pid 1 before the payload runs, the
 * payload before its exec, an intermediate) that fails sends one status byte and its message
 * down a pipe and leaves; csandbox reads them once the child is gone. In a file of its own,
 * so that the files of the set-up (launch, init, exec) call it without calling each other
 * back. */
#include "internal.h"

#include "../common/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A child-side failure travels to the parent as one status byte and the message. */
void runner_child_fail(int errfd, const struct cs_error *err)
{
        unsigned char status = (unsigned char)(err->status ? err->status : CS_EXIT_SETUP);
        char buf[1 + CS_ERROR_MAX];
        size_t len = strlen(err->msg);

        buf[0] = (char)status;
        memcpy(buf + 1, err->msg, len);
        if (errfd >= 0)
                (void)!write(errfd, buf, len + 1);
        _exit(status);
}

/* The message a failed child left, if any; sets err and its status. */
bool runner_child_message(int errfd, struct cs_error *err)
{
        char buf[1 + CS_ERROR_MAX];
        ssize_t n;

        do
                n = read(errfd, buf, sizeof(buf) - 1);
        while (n < 0 && errno == EINTR);
        if (n <= 1)
                return false;
        buf[n] = '\0';
        snprintf(err->msg, sizeof(err->msg), "%s", buf + 1);
        err->status = (unsigned char)buf[0];
        err->err = 0;
        return true;
}
