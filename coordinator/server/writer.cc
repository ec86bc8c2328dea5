#include "server/writer.h"

#include <cstdlib>
#include <exception>

#include "log/log.h"

namespace pgfence::server {

Writer::Writer(Post post) : post_(std::move(post)), thread_([this] { run(); }) {}

Writer::~Writer() { stop(); }

void Writer::submit(std::function<void()> work, Done done) {
    {
        std::lock_guard<std::mutex> guard(mutex_);
        jobs_.push_back(Job{std::move(work), std::move(done)});
    }
    cv_.notify_one();
}

void Writer::stop() {
    {
        std::lock_guard<std::mutex> guard(mutex_);
        if (stopping_ && !thread_.joinable()) return;
        stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
}

void Writer::run() {
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
            if (jobs_.empty()) return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        run_storage_work(job.work);
        post_(std::move(job.done));
    }
}

void run_storage_work(const std::function<void()>& work) {
    try {
        work();
    } catch (const std::exception& e) {
        log::log_event(log::LogLevel::kError, "storage_write_failed", {{"error", e.what()}});
        std::_Exit(74);
    } catch (...) {
        log::log_event(log::LogLevel::kError, "storage_write_failed", {{"error", "unknown exception"}});
        std::_Exit(74);
    }
}

}  // namespace pgfence::server
