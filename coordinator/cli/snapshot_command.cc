#include "cli/snapshot_command.h"

#include <boost/json.hpp>
#include <ctime>
#include <filesystem>

#include "cli/commands.h"
#include "client/exit_codes.h"
#include "cli/output.h"
#include "lock/table.h"
#include "storage/backup.h"
#include "storage/file_util.h"

namespace pgfence::cli {
namespace json = boost::json;

namespace {


// What `status` and `save` say of a backup: "" and `o` filled, or why the
// lock table inside does not restore.
std::string describe(const storage::Backup& b, std::size_t bytes, json::object& o) {
    auto table = lock::LockTable::restore(b.snapshot.data);
    if (auto* bad = std::get_if<lock::DecodeError>(&table)) return "the lock table inside does not restore: " + bad->message;
    const lock::LockTable& t = std::get<lock::LockTable>(table);
    json::array voters, learners;
    for (const raft::ConfigMember& m : b.snapshot.meta.config.members) (m.voter ? voters : learners).push_back(m.id);
    o = json::object{{"cluster_id", std::to_string(b.cluster_id)},
                     {"created", utc_text(static_cast<std::int64_t>(b.created_unix_ms), false)},
                     {"created_unix_ms", b.created_unix_ms},
                     {"index", b.snapshot.meta.index},
                     {"term", b.snapshot.meta.term},
                     {"locks", t.size()},
                     {"last_token", t.last_token()},
                     {"token_floor", t.token_floor()},
                     {"voters", std::move(voters)},
                     {"learners", std::move(learners)},
                     {"bytes", bytes}};
    return {};
}

void print(const json::object& o, const Args& args, std::ostream& out) {
    if (args.output == Output::kJson) {
        out << json::serialize(o) << '\n';
        return;
    }
    auto list = [](const json::value& v) {
        std::string s;
        for (const json::value& id : v.as_array()) {
            if (!s.empty()) s += ',';
            s += json::serialize(id);
        }
        return s.empty() ? std::string("-") : s;
    };
    std::vector<std::vector<std::string>> rows{
        {"file", std::string(o.at("file").as_string())},
        {"cluster", std::string(o.at("cluster_id").as_string())},
        {"created", std::string(o.at("created").as_string())},
        {"index", json::serialize(o.at("index"))},
        {"term", json::serialize(o.at("term"))},
        {"locks", json::serialize(o.at("locks"))},
        {"last token", json::serialize(o.at("last_token"))},
        {"token floor", json::serialize(o.at("token_floor"))},
        {"voters", list(o.at("voters"))},
        {"learners", list(o.at("learners"))},
        {"bytes", json::serialize(o.at("bytes"))},
        {"checksum", "ok (CRC32C)"},
    };
    print_table(out, {"FIELD", "VALUE"}, rows);
}

int save(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    const std::string& file = args.positional[1];
    auto r = c.snapshot(args.timeout.value_or(kSnapshotTimeout));
    if (!r) {
        err << "fencectl snapshot save: " << r.error().message << '\n';
        return exit_code_of(r.error(), "snapshot");
    }
    storage::Backup b;
    json::object o;
    std::string why = storage::decode_backup(r.value(), b);
    if (why.empty()) why = describe(b, r.value().size(), o);
    if (!why.empty()) {
        err << "fencectl snapshot save: the leader's answer is not a good backup (" << why << "); " << file
            << " was not written\n";
        return kExitOther;
    }
    const std::filesystem::path path = std::filesystem::absolute(file);
    try {
        storage::write_file_atomically(path.parent_path().string(), path.filename().string(), r.value());
    } catch (const std::exception& e) {
        err << "fencectl snapshot save: " << e.what() << '\n';
        return kExitOther;
    }
    o["file"] = path.string();
    print(o, args, out);
    return kExitOk;
}

int status(const Args& args, std::ostream& out, std::ostream& err) {
    const std::string& file = args.positional[1];
    std::string bytes;
    try {
        bytes = storage::read_whole_file(file, storage::kMaxBackupBytes);
    } catch (const std::exception& e) {
        err << "fencectl snapshot status: " << e.what() << '\n';
        return kExitOther;
    }
    storage::Backup b;
    json::object o;
    std::string why = storage::decode_backup(bytes, b);
    if (why.empty()) why = describe(b, bytes.size(), o);
    if (!why.empty()) {
        err << "fencectl snapshot status: " << file << ": " << why << '\n';
        return kExitOther;
    }
    o["file"] = file;
    print(o, args, out);
    return kExitOk;
}

}  // namespace

int run_snapshot_command(const Args& args, client::Client& client, std::ostream& out, std::ostream& err) {
    return args.subcommand == "save" ? save(args, client, out, err) : status(args, out, err);
}

}  // namespace pgfence::cli
