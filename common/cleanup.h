/* Scope-bound resources: `_cleanup_close_ int fd = -1;` closes on every return path. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>

static inline void cs_closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}
static inline void cs_freep(void *p)
{
        free(*(void **)p);
}
static inline void cs_fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}
static inline void cs_closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

#define _cleanup_(f)       __attribute__((cleanup(f)))
#define _cleanup_close_    __attribute__((cleanup(cs_closep)))
#define _cleanup_free_     __attribute__((cleanup(cs_freep)))
#define _cleanup_fclose_   __attribute__((cleanup(cs_fclosep)))
#define _cleanup_closedir_ __attribute__((cleanup(cs_closedirp)))

/* Hand ownership out of a cleanup variable. */
static inline int cs_take_fd(int *fd)
{
        int r = *fd;
        *fd = -1;
        return r;
}
static inline void *cs_take_ptr(void *pp)
{
        void **p = pp;
        void *r = *p;
        *p = NULL;
        return r;
}
