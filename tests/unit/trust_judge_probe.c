/* The journal's judge on one work tree, for the differential test of git's repository
 * discovery (tests/unit/git_discovery_oracle.py): trust_judge_probe ROOT MAIN_GIT_DIR REL...
 * judges each REL (a changed path below ROOT) as a session's change and prints one line per
 * REL: the path, a tab and the number of findings. MAIN_GIT_DIR is the repository's own git
 * dir ("-" for none), whose config the session cannot write. */
#include "policy/trust_rules.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
        struct trust_rules r = {0};
        struct stat st;
        int root_fd;

        if (argc < 3) {
                fprintf(stderr, "usage: trust_judge_probe ROOT MAIN_GIT_DIR REL...\n");
                return 125;
        }
        root_fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r.root_path[TRUST_ROOT_WORK] = strdup(argv[1]);
        r.home = strdup("/nonexistent");
        if (root_fd < 0 || !r.root_path[TRUST_ROOT_WORK] || !r.home) {
                fprintf(stderr, "trust_judge_probe: cannot open %s\n", argv[1]);
                return 125;
        }
        if (strcmp(argv[2], "-") != 0 && stat(argv[2], &st) == 0) {
                r.main_dev = (unsigned long long)st.st_dev;
                r.main_ino = (unsigned long long)st.st_ino;
        }
        for (int i = 3; i < argc; i++) {
                struct plan_trust out = {0};

                trust_judge(&r, TRUST_ROOT_WORK, root_fd, argv[i], &out);
                printf("%s\t%zu", argv[i], out.n);
                for (size_t k = 0; k < out.n; k++)
                        printf("\t%s", out.items[k]);
                printf("\n");
                trust_free(&out);
        }
        trust_rules_free(&r);
        close(root_fd);
        return 0;
}
