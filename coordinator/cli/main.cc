// fencectl: the command-line client of a pgfence coordinator cluster.
#include <iostream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "client/exit_codes.h"
#include "cli/help.h"
#include "cli/run_command.h"
#include "cli/seq_file.h"
#include "pgfence_version.h"

int main(int argc, char** argv) {
    using namespace pgfence;
    using namespace pgfence::cli;
    const std::vector<std::string> words(argv + 1, argv + argc);
    const ArgsParse parsed = parse_args(words);
    if (!parsed.error.empty()) {
        std::cerr << "fencectl: " << parsed.error << '\n';
        return kExitUsage;
    }
    const Args& args = parsed.args;
    if (args.version) {
        std::cout << "fencectl (pgfence) " PGFENCE_VERSION "\n";
        return kExitOk;
    }
    if (args.help) {
        std::cout << help_text(args.command);
        return kExitOk;
    }
    if (args.command == "seq") return seq_command(std::cout, std::cerr);  // no cluster involved
    pgfence::client::Options options;
    std::string error;
    if (!client_options(args, options, error)) {
        std::cerr << "fencectl: " << error << '\n';
        return kExitUsage;
    }
    try {
        pgfence::client::Client client(options);
        if (args.command == "run") return run_with_lock(args, client, std::cerr);
        if (args.command == "elect") return run_elected(args, client, std::cerr);
        return run_simple_command(args, client, std::cout, std::cerr);
    } catch (const std::exception& e) {
        std::cerr << "fencectl: " << e.what() << '\n';
        return kExitOther;
    }
}
