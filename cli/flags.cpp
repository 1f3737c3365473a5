#include "flags.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>

namespace meganeura::cli {
namespace {

template <class T>
T parse_integer(const std::string& program, const std::string& name, const std::string& text) {
  T v{};
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end)
    throw UsageError("[" + program + "] expected a whole number for " + name + ", got '" + text + "'");
  return v;
}

std::string shown(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

Flags::Flags(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void Flags::add(Option o) {
  for (const Option& e : options_)
    if (e.name == o.name) throw ConfigError("[Flags] expected a new option name, got " + o.name + " twice");
  options_.push_back(std::move(o));
}

void Flags::option(const std::string& name, std::string& out, const std::string& help,
                   const std::string& metavar) {
  add({name, help, metavar, out, false, [&out](const std::string& v) { out = v; }});
}
void Flags::option(const std::string& name, int& out, const std::string& help, const std::string& metavar) {
  add({name, help, metavar, std::to_string(out), false,
       [&out, this, name](const std::string& v) { out = parse_integer<int>(program_, name, v); }});
}
void Flags::option(const std::string& name, int64_t& out, const std::string& help,
                   const std::string& metavar) {
  add({name, help, metavar, std::to_string(out), false,
       [&out, this, name](const std::string& v) { out = parse_integer<int64_t>(program_, name, v); }});
}
void Flags::option(const std::string& name, uint64_t& out, const std::string& help,
                   const std::string& metavar) {
  add({name, help, metavar, std::to_string(out), false,
       [&out, this, name](const std::string& v) { out = parse_integer<uint64_t>(program_, name, v); }});
}
void Flags::option(const std::string& name, double& out, const std::string& help,
                   const std::string& metavar) {
  add({name, help, metavar, shown(out), false, [&out, this, name](const std::string& v) {
         char* end = nullptr;
         const double d = v.empty() ? NAN : std::strtod(v.c_str(), &end);
         if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(d))
           throw UsageError("[" + program_ + "] expected a finite number for " + name + ", got '" + v + "'");
         out = d;
       }});
}
void Flags::choice(const std::string& name, std::string& out, std::vector<std::string> choices,
                   const std::string& help) {
  std::string metavar;
  for (const std::string& c : choices) metavar += (metavar.empty() ? "" : "|") + c;
  add({name, help, metavar, out, false, [&out, this, name, choices, metavar](const std::string& v) {
         for (const std::string& c : choices)
           if (c == v) {
             out = v;
             return;
           }
         throw UsageError("[" + program_ + "] expected " + name + " to be one of " + metavar + ", got '" + v +
                          "'");
       }});
}
void Flags::flag(const std::string& name, bool& out, const std::string& help) {
  add({name, help, "", "", true, [&out](const std::string&) { out = true; }});
}
void Flags::precision(Precision& out) {
  try {
    out = SessionConfig::from_env().precision;
  } catch (const ConfigError& e) {
    environment_error_ = e.what();
  }
  add({"--precision",
       "f32; mixed16: f16 matmul inputs, f32 accumulation; f16|bf16: 16-bit weights for inference "
       "(MEGANEURA_PRECISION sets the default)",
       "f32|mixed16|f16|bf16", precision_name(out), false, [&out, this](const std::string& v) {
         try {
           out = parse_precision(v, "--precision");
         } catch (const ConfigError& e) {
           throw UsageError("[" + program_ +
                            "] expected --precision to be one of f32, mixed16, f16, bf16, got '" + v + "'");
         }
       }});
}
void Flags::custom(const std::string& name, std::function<void(const std::string&)> set,
                   const std::string& help, const std::string& metavar, const std::string& default_text) {
  add({name, help, metavar, default_text, false, std::move(set)});
}
void Flags::positional(const std::string& name, std::string& out, const std::string& help, bool required) {
  positionals_.push_back({name, help, required, &out});
}

void Flags::alias(const std::string& short_name, const std::string& name) {
  for (const Option& o : options_)
    if (o.name == short_name)
      throw ConfigError("[Flags] expected a new option name, got " + short_name + " twice");
  for (const auto& [s, n] : aliases_)
    if (s == short_name)
      throw ConfigError("[Flags] expected a new option name, got " + short_name + " twice");
  for (const Option& o : options_)
    if (o.name == name) {
      aliases_.emplace_back(short_name, name);
      return;
    }
  throw ConfigError("[Flags] expected alias() of an option added before, got " + name);
}

std::string Flags::short_name_of(const std::string& name) const {
  for (const auto& [s, n] : aliases_)
    if (n == name) return s;
  return "";
}

std::vector<std::string> Flags::option_names() const {
  std::vector<std::string> names;
  for (const Option& o : options_) names.push_back(o.name);
  names.push_back("--help");
  return names;
}

void Flags::fail(const std::string& what) const { throw UsageError("[" + program_ + "] " + what); }

bool Flags::parse(int argc, char** argv) {
  size_t next_positional = 0;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (!options_done && (a == "--help" || a == "-h")) {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    if (!options_done && a == "--") {
      options_done = true;
      continue;
    }
    if (!options_done && a.size() > 1 && a[0] == '-') {
      const size_t eq = a.find('=');
      std::string name = a.substr(0, eq);
      for (const auto& [s, n] : aliases_)
        if (s == name) name = n;
      const Option* opt = nullptr;
      for (const Option& o : options_)
        if (o.name == name) opt = &o;
      if (!opt) {
        std::string valid;
        for (const std::string& n : option_names()) valid += (valid.empty() ? "" : ", ") + n;
        fail("expected one of the options " + valid + ", got '" + a + "'");
      }
      if (opt->is_flag) {
        if (eq != std::string::npos) fail("expected no value for " + name + ", got '" + a + "'");
        opt->set("");
        continue;
      }
      std::string value;
      if (eq != std::string::npos)
        value = a.substr(eq + 1);
      else if (i + 1 < argc)
        value = argv[++i];
      else
        fail("expected a value (" + opt->metavar + ") after " + name + ", got none");
      opt->set(value);
      continue;
    }
    if (next_positional >= positionals_.size())
      fail("expected " + std::to_string(positionals_.size()) + " argument(s)" +
           (positionals_.empty() ? "" : " (" + positionals_.back().name + " last)") + ", got also '" + a +
           "'");
    *positionals_[next_positional++].out = a;
  }
  for (size_t p = next_positional; p < positionals_.size(); ++p)
    if (positionals_[p].required) fail("expected the argument " + positionals_[p].name + ", got none");
  return true;
}

std::string Flags::usage() const {
  std::string line = "usage: " + program_;
  if (!options_.empty()) line += " [options]";
  for (const Positional& p : positionals_) line += p.required ? " " + p.name : " [" + p.name + "]";
  std::string out = line + "\n";
  if (!summary_.empty()) out += "\n" + summary_ + "\n";
  auto row = [&](const std::string& left, const std::string& help) {
    std::string l = "  " + left;
    if (l.size() < 28)
      l.resize(28, ' ');
    else
      l += "\n" + std::string(28, ' ');
    out += l + help + "\n";
  };
  if (!positionals_.empty()) {
    out += "\narguments:\n";
    for (const Positional& p : positionals_) row(p.name, p.help);
  }
  out += "\noptions:\n";
  for (const Option& o : options_) {
    std::string help = o.help;
    if (!o.is_flag && !o.default_text.empty()) help += " (default " + o.default_text + ")";
    const std::string short_name = short_name_of(o.name);
    const std::string spelled = short_name.empty() ? o.name : short_name + ", " + o.name;
    row(o.is_flag ? spelled : spelled + " " + o.metavar, help);
  }
  row("-h, --help", "print this help and exit");
  if (!epilog_.empty()) out += "\n" + epilog_ + (epilog_.back() == '\n' ? "" : "\n");
  return out;
}

int run(Flags& flags, int argc, char** argv, const std::function<int()>& body) {
  try {
    if (!flags.parse(argc, argv)) return 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n\n%s", e.what(), flags.usage().c_str());
    return 2;
  }
  if (!flags.environment_error().empty()) {
    std::fprintf(stderr, "%s: %s\n", flags.program().c_str(), flags.environment_error().c_str());
    return 1;
  }
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", flags.program().c_str(), e.what());
    return 1;
  }
}

void json_line(const std::string& object_text) {
  std::fputs(object_text.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace meganeura::cli
