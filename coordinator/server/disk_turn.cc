// DiskTurn's transition (disk_turn.h): one case per event.
#include "server/disk_turn.h"

namespace pgfence::server {

namespace {

DiskTurn::Action broken(std::string_view rule) {
    DiskTurn::Action a;
    a.kind = DiskTurn::Action::kBroken;
    a.broken = rule;
    return a;
}

DiskTurn::Action with(DiskTurn::Action::Kind kind, std::shared_ptr<const raft::Snapshot> snapshot = nullptr) {
    DiskTurn::Action a;
    a.kind = kind;
    a.snapshot = std::move(snapshot);
    return a;
}

}  // namespace

DiskTurn::Action DiskTurn::step(const Event& event) {
    return std::visit([this](const auto& e) { return on(e); }, event);
}

DiskTurn::Action DiskTurn::on(const PersistTaken& e) {
    if (persist_ != Persist::kNone) return broken("a Persist was taken while another was outstanding");
    // Behind a queued adoption, a follower's Persist queues on the writer
    // too: on the loop it would run beside the adoption.
    if (e.leader || save_ == Save::kAdopting) {
        persist_ = Persist::kOnWriter;
        return with(Action::kPersistOnWriter);
    }
    persist_ = Persist::kOnLoop;
    return with(Action::kPersistOnLoop);
}

DiskTurn::Action DiskTurn::on(const PersistDone&) {
    if (persist_ == Persist::kNone) return broken("a Persist finished while none was outstanding");
    persist_ = Persist::kNone;
    if (save_ != Save::kWaiting) return with(Action::kNothing);
    save_ = Save::kFile;
    return with(Action::kWriteFile, snapshot_);
}

DiskTurn::Action DiskTurn::on(const SaveTaken& e) {
    if (e.snapshot == nullptr) return broken("a snapshot save was taken without a snapshot");
    if (save_ != Save::kNone) return broken("a snapshot save was taken while another was outstanding");
    snapshot_ = e.snapshot;
    if (persist_ != Persist::kNone) {
        save_ = Save::kWaiting;
        return with(Action::kNothing);
    }
    save_ = Save::kFile;
    return with(Action::kWriteFile, snapshot_);
}

DiskTurn::Action DiskTurn::on(const FileWritten&) {
    if (save_ != Save::kFile) return broken("a snapshot file was written while none was being written");
    if (persist_ == Persist::kOnLoop) return broken("an adoption was queued while the loop wrote a Persist");
    save_ = Save::kAdopting;
    return with(Action::kAdoptOnWriter, snapshot_);
}

DiskTurn::Action DiskTurn::on(const Adopted&) {
    if (save_ != Save::kAdopting) return broken("a snapshot was adopted while none was queued for adoption");
    save_ = Save::kNone;
    return with(Action::kSaved, std::move(snapshot_));
}

std::string_view DiskTurn::check() const {
    if (persist_ == Persist::kOnLoop && save_ == Save::kAdopting) {
        return "the loop writes a Persist while an adoption is queued on the writer";
    }
    if (save_ == Save::kWaiting && persist_ == Persist::kNone) {
        return "a snapshot file waits while no Persist is outstanding";
    }
    if ((save_ == Save::kNone) != (snapshot_ == nullptr)) return "the save's snapshot does not match its state";
    return {};
}

}  // namespace pgfence::server
