// libFuzzer target for the lock decoders (coordinator/lock).
//
// Every input is tried three ways:
//   1. as one command: decode_command() must not crash; what decodes must
//      re-encode to exactly the input (the encoding is canonical) and apply to
//      a fresh table without breaking its invariants;
//   2. as a snapshot: restore() must not crash; what restores must satisfy the
//      invariants, re-encode to exactly the input, and issue a next token above
//      last_token();
//   3. as a command stream ([u16 length][command] ...): each decoded command is
//      applied in order and the invariants checked after every step.
// A violated property calls __builtin_trap(), which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "lock/commands.h"
#include "lock/table.h"

namespace {

using namespace pgfence::lock;

constexpr std::size_t kStreamLengthBytes = 2;
constexpr std::uint64_t kFuzzLeaseMs = 1000;

void require(bool property) {
    if (!property) __builtin_trap();
}

void check_table(const LockTable& table) {
    require(table.check_invariants().empty());
}

void fuzz_command(std::string_view bytes) {
    auto entry = decode_entry(bytes);
    auto decoded = decode_command(bytes);
    if (auto* error = std::get_if<DecodeError>(&decoded)) {
        require(!error->message.empty());
        require(std::holds_alternative<DecodeError>(entry));
        return;
    }
    const Command& cmd = std::get<Command>(decoded);
    // One encoding per entry: a stamped one (version 4) is its stamp and the command's own.
    require(std::holds_alternative<Stamped>(entry));
    const Stamped& stamped = std::get<Stamped>(entry);
    require(stamped.command == cmd);
    require((stamped.wall_ms ? encode(cmd, *stamped.wall_ms) : encode(cmd)) == bytes);
    (void)validate(cmd);
    (void)describe(cmd);
    LockTable table;
    (void)describe(table.apply(1, cmd));
    check_table(table);
}

void fuzz_snapshot(std::string_view bytes) {
    auto restored = LockTable::restore(bytes);
    if (auto* error = std::get_if<DecodeError>(&restored)) {
        require(!error->message.empty());
        return;
    }
    LockTable& table = std::get<LockTable>(restored);
    check_table(table);
    require(table.snapshot() == bytes);
    const Token last = table.last_token();
    if (table.applied_index() == UINT64_MAX) return;
    const Result r = table.apply(table.applied_index() + 1, Grant{"fuzz:next", kFuzzLeaseMs, ""});
    if (auto* granted = std::get_if<Granted>(&r)) require(granted->token > last);
    check_table(table);
}

void fuzz_stream(std::string_view bytes) {
    LockTable table;
    std::uint64_t index = 0;
    while (bytes.size() >= kStreamLengthBytes) {
        const std::size_t length =
            static_cast<unsigned char>(bytes[0]) |
            (static_cast<std::size_t>(static_cast<unsigned char>(bytes[1])) << 8);
        bytes.remove_prefix(kStreamLengthBytes);
        const std::string_view entry = bytes.substr(0, length);
        bytes.remove_prefix(entry.size());
        auto decoded = decode_command(entry);
        const Token last = table.last_token();
        if (auto* cmd = std::get_if<Command>(&decoded)) {
            const Result r = table.apply(++index, *cmd);
            require(table.last_token() >= last);
            if (auto* granted = std::get_if<Granted>(&r)) {
                // Either a new token, now the largest, or an idempotent re-grant.
                const Lock* held = table.find(std::get<Grant>(*cmd).key);
                require(held != nullptr && held->token == granted->token);
                require(granted->token <= last || granted->token == table.last_token());
            }
        } else {
            table.apply_noop(++index);
        }
        check_table(table);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    fuzz_command(bytes);
    fuzz_snapshot(bytes);
    fuzz_stream(bytes);
    return 0;
}
