// DurableLog over the storage module's DurableStorage (the WAL on disk).
#include "server/durable_log.h"

#include "log/log.h"
#include "storage/durable_storage.h"

namespace pgfence::server {

namespace {

class WalLog final : public DurableLog {
public:
    explicit WalLog(std::unique_ptr<storage::DurableStorage> s) : storage_(std::move(s)) {}
    const raft::Storage& storage() const override { return *storage_; }
    void persist(const std::optional<raft::HardState>& hard_state, const std::optional<raft::Snapshot>& snapshot,
                 const std::vector<raft::Entry>& entries) override {
        storage_->persist(hard_state ? &*hard_state : nullptr, snapshot ? &*snapshot : nullptr, entries);
    }
    PersistTimes last_persist() const override { return storage_->last_persist(); }
    bool write_snapshot_file(const raft::Snapshot& snapshot) override {
        return storage_->write_snapshot_file(snapshot);
    }
    void adopt_snapshot(const std::shared_ptr<const raft::Snapshot>& snapshot) override {
        storage_->adopt_snapshot(snapshot);
    }
    void persist_commit(const raft::HardState& hard_state) override { storage_->persist_commit(hard_state); }

private:
    std::unique_ptr<storage::DurableStorage> storage_;
};

}  // namespace

std::unique_ptr<DurableLog> open_durable_log(const std::string& dir, const storage::Identity& identity) {
    storage::StorageOptions opts;
    opts.on_warning = [dir](const std::string& w) {
        log::log_event(log::LogLevel::kWarn, "storage_warning", {{"dir", dir}, {"warning", w}});
    };
    return std::make_unique<WalLog>(storage::DurableStorage::open(dir, identity, opts));
}

}  // namespace pgfence::server
