// raise_open_files_limit: setrlimit(RLIMIT_NOFILE) within the hard limit.
#include "server/open_files.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pgfence::server {

std::string raise_open_files_limit(std::uint64_t needed, OpenFilesLimit& out) {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno);
    out.soft = lim.rlim_cur;
    out.hard = lim.rlim_max;
    out.raised = false;
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < needed) {
        const rlim_t want = lim.rlim_max == RLIM_INFINITY ? needed : std::min<rlim_t>(needed, lim.rlim_max);
        if (want > lim.rlim_cur) {
            rlimit raised = lim;
            raised.rlim_cur = want;
            if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
                return "setrlimit(RLIMIT_NOFILE) to " + std::to_string(want) + ": " + std::strerror(errno);
            }
            out.soft = want;
            out.raised = true;
        }
    }
    return {};
}

}  // namespace pgfence::server
