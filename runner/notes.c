/* The notes: where the machine made a launch adapt (runner.h), recorded by the launch's
 * child and printed once per machine and user. */
#include "internal.h"

#include "../common/cleanup.h"
#include "../common/error.h"
#include "../common/fileio.h"

#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The notes (runner.h): `shared` is a page the launch's child writes its adaptations into
 * (MAP_SHARED, made before clone), `quiet` what the child leaves unsaid. */
static struct {
        bool all_quiet;   /* doctor: the caller prints them */
        unsigned quiet;   /* this launch: bits not to print */
        unsigned seen;    /* OR of every launch's */
        unsigned *shared; /* the child's record of this launch */
} notes;

static const struct {
        unsigned bit;
        const char *marker; /* NULL: never printed at a launch */
        const char *text;
} note_texts[] = {
    {RUNNER_NOTE_HOSTNAME, NULL, NULL},
    /* worded for where csandbox runs (runner_proc_words) */
    {RUNNER_NOTE_PROC_BIND, "proc-bind", ""},
};

static void note_print(unsigned bit)
{
        const char *cause, *fix;

        if (bit != RUNNER_NOTE_PROC_BIND)
                return;
        runner_proc_words(&cause, &fix);
        runner_warn("csandbox: note (shown once on this machine): the kernel refused the "
                    "sandbox a fresh /proc (%s), so csandbox binds the outer /proc read-only "
                    "and sessions see its processes; %s for a /proc of the sandbox's own (`exec "
                    "--proc=none` gives an empty one instead)",
                    cause, fix);
}

void runner_notes_quiet(void)
{
        notes.all_quiet = true;
}

bool runner_notes_all_quiet(void)
{
        return notes.all_quiet;
}

unsigned runner_notes_seen(void)
{
        return notes.seen;
}

void runner_note(unsigned bit)
{
        if (notes.shared)
                __atomic_or_fetch(notes.shared, bit, __ATOMIC_RELAXED);
        if (notes.all_quiet || (notes.quiet & bit))
                return;
        for (size_t i = 0; i < sizeof(note_texts) / sizeof(note_texts[0]); i++)
                if (note_texts[i].bit == bit && note_texts[i].text)
                        note_print(bit);
}

/* ${XDG_STATE_HOME:-$HOME/.local/state}/csandbox/notes/<name>, or NULL. */
static char *note_marker(const char *name)
{
        const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
        char *path = NULL;
        int r;

        if (state && state[0] == '/')
                r = asprintf(&path, "%s/csandbox/notes/%s", state, name);
        else if (home && home[0] == '/')
                r = asprintf(&path, "%s/.local/state/csandbox/notes/%s", home, name);
        else
                return NULL;
        return r < 0 ? NULL : path;
}

/* Before clone: which notes were shown on this machine already. */
void runner_notes_begin(void)
{
        const char *cause, *fix;

        /* where csandbox runs is found here, before the clone: the child's view is its own */
        runner_proc_words(&cause, &fix);
        notes.quiet = RUNNER_NOTE_HOSTNAME;
        for (size_t i = 0; i < sizeof(note_texts) / sizeof(note_texts[0]); i++) {
                _cleanup_free_ char *m =
                    note_texts[i].marker ? note_marker(note_texts[i].marker) : NULL;

                if (m && access(m, F_OK) == 0)
                        notes.quiet |= note_texts[i].bit;
        }
        if (!notes.shared) {
                void *page = mmap(NULL, sizeof(unsigned), PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);

                notes.shared = page == MAP_FAILED ? NULL : page;
        }
        if (notes.shared)
                *notes.shared = 0;
}

/* The marker of a note shown, made in the user's own state dir (the marker itself never
 * through a link). */
static void note_mark(const char *name)
{
        /* Dropped: without the marker the note shows again next time. */
        struct cs_error ignored;
        _cleanup_free_ char *m = note_marker(name);
        _cleanup_close_ int fd = -1;
        char *slash;

        if (!m)
                return;
        slash = strrchr(m, '/');
        *slash = '\0';
        if (cs_mkdir_parents(m, 0700, &ignored) < 0)
                return;
        *slash = '/';
        fd = open(m, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
}

bool runner_note_first(const char *name)
{
        _cleanup_free_ char *m = note_marker(name);

        if (m && access(m, F_OK) == 0)
                return false;
        note_mark(name);
        return true;
}

/* After the launch: what it adapted to, and a marker for each note it printed. */
void runner_notes_end(void)
{
        unsigned got = notes.shared ? __atomic_load_n(notes.shared, __ATOMIC_RELAXED) : 0;

        notes.seen |= got;
        if (notes.all_quiet)
                return;
        for (size_t i = 0; i < sizeof(note_texts) / sizeof(note_texts[0]); i++)
                if ((got & note_texts[i].bit) && !(notes.quiet & note_texts[i].bit) &&
                    note_texts[i].marker)
                        note_mark(note_texts[i].marker);
}
