// SPDX-License-Identifier: MIT
//
// The C face on RE2; see linre.h. The one C++ file of fleetprof: RE2 has
// no C interface, and this file keeps its types and exceptions on this
// side of it.
#include "linre.h"

#include <errno.h>
#include <new>
#include <re2/re2.h>
#include <stdio.h>
#include <string>

struct fp_linre {
        re2::RE2 re;
        fp_linre(const std::string &p, const re2::RE2::Options &o) : re(p, o) {}
};

extern "C" int fp_linre_new(const char *pattern, size_t max_mem, struct fp_linre **ret,
                            char *err, size_t errlen)
{
        try {
                re2::RE2::Options o;
                o.set_log_errors(false);
                o.set_max_mem((int64_t)max_mem);
                o.set_dot_nl(true);
                // Anchored by FullMatch, not by text around it: "a)|(b" stays one pattern.
                fp_linre *re = new fp_linre(pattern, o);
                if (!re->re.ok()) {
                        if (err && errlen)
                                snprintf(err, errlen, "%s", re->re.error().c_str());
                        delete re;
                        return -EINVAL;
                }
                *ret = re;
                return 0;
        } catch (const std::bad_alloc &) {
                if (err && errlen)
                        snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
}

extern "C" bool fp_linre_match(const struct fp_linre *re, const char *s, size_t len)
{
        return re2::RE2::FullMatch(re2::StringPiece(s, len), re->re);
}

extern "C" void fp_linre_free(struct fp_linre *re)
{
        delete re;
}
