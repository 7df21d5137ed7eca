// Command-line flags of the C++ gRPC peers (tests/grpc/cpp, bench/grpc) in gflags' forms:
// --name=value, --name value, and booleans as --name, --name=true or --name=false.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

namespace eddy_grpc {

class Flags {
 public:
  // Parses argv against the known names (bools: those that take no value); prints usage and
  // exits 2 on anything else.
  Flags(int argc, char** argv, const std::set<std::string>& names,
        const std::set<std::string>& bools, const char* usage) {
    for (int i = 1; i < argc; i++) {
      std::string arg = argv[i];
      if (arg.rfind("--", 0) != 0) Die(usage, "unexpected argument: " + arg);
      std::string name = arg.substr(2), value;
      bool inline_value = false;
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      if (bools.count(name)) {
        if (!inline_value && i + 1 < argc &&
            (std::string(argv[i + 1]) == "true" || std::string(argv[i + 1]) == "false")) {
          value = argv[++i];
        } else if (!inline_value) {
          value = "true";
        }
        if (value != "true" && value != "false" && value != "1" && value != "0")
          Die(usage, "--" + name + ": not a boolean: " + value);
        values_[name] = (value == "true" || value == "1") ? "true" : "false";
        continue;
      }
      if (!names.count(name)) Die(usage, "unknown flag: --" + name);
      if (!inline_value) {
        if (i + 1 >= argc) Die(usage, "--" + name + " needs a value");
        value = argv[++i];
      }
      values_[name] = value;
    }
    usage_ = usage;
  }

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  std::string Str(const std::string& name, const std::string& def = "") const {
    auto it = values_.find(name);
    return it == values_.end() ? def : it->second;
  }
  bool Bool(const std::string& name) const { return Str(name, "false") == "true"; }
  long Int(const std::string& name, long def) const {
    if (!Has(name)) return def;
    char* end = nullptr;
    std::string v = Str(name);
    long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end) Die(usage_, "--" + name + ": not a number: " + v);
    return n;
  }
  double Double(const std::string& name, double def) const {
    if (!Has(name)) return def;
    char* end = nullptr;
    std::string v = Str(name);
    double n = std::strtod(v.c_str(), &end);
    if (v.empty() || *end) Die(usage_, "--" + name + ": not a number: " + v);
    return n;
  }
  [[noreturn]] static void Die(const char* usage, const std::string& why) {
    std::fprintf(stderr, "%s\nusage: %s\n", why.c_str(), usage);
    std::exit(2);
  }

 private:
  std::map<std::string, std::string> values_;
  const char* usage_ = "";
};

// The whole of a (small) file, or exit 1 naming it.
inline std::string ReadFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

}  // namespace eddy_grpc
