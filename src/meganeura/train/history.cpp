#include "meganeura/train/history.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meganeura/core/error.hpp"

namespace meganeura {
namespace {

std::string num(double v) {
  if (!std::isfinite(v)) return "nan";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string History::to_json() const {
  nlohmann::json j;
  j["steps"] = nlohmann::json::array();
  for (const StepRecord& s : steps)
    j["steps"].push_back({{"step", s.step},
                          {"epoch", s.epoch},
                          {"loss", s.loss},
                          {"lr", s.lr},
                          {"steps_per_s", s.steps_per_s}});
  j["epochs"] = nlohmann::json::array();
  for (const EpochRecord& e : epochs) {
    nlohmann::json r = {{"epoch", e.epoch},
                        {"train_loss", e.train_loss},
                        {"steps", e.steps},
                        {"seconds", e.seconds},
                        {"steps_per_s", e.steps_per_s}};
    if (e.test_loss) r["test_loss"] = *e.test_loss;
    if (e.test_accuracy) r["test_accuracy"] = *e.test_accuracy;
    j["epochs"].push_back(r);
  }
  return j.dump(1) + "\n";
}

std::string History::to_csv() const {
  std::string out = "kind,step,epoch,loss,lr,steps_per_s,test_loss,test_accuracy\n";
  for (const StepRecord& s : steps)
    out += "step," + std::to_string(s.step) + "," + std::to_string(s.epoch) + "," + num(s.loss) + "," +
           num(s.lr) + "," + num(s.steps_per_s) + ",,\n";
  for (const EpochRecord& e : epochs)
    out += "epoch," + std::to_string(e.steps) + "," + std::to_string(e.epoch) + "," + num(e.train_loss) +
           ",," + num(e.steps_per_s) + "," + (e.test_loss ? num(*e.test_loss) : "") + "," +
           (e.test_accuracy ? num(*e.test_accuracy) : "") + "\n";
  return out;
}

std::string History::to_svg(int width, int height) const {
  const double left = 60, right = 20, top = 20, bottom = 40;
  const double pw = width - left - right, ph = height - top - bottom;
  double max_step = 1, max_loss = 0;
  for (const StepRecord& s : steps) {
    max_step = std::max(max_step, static_cast<double>(s.step));
    if (std::isfinite(s.loss)) max_loss = std::max(max_loss, s.loss);
  }
  int64_t cumulative = 0;
  std::vector<std::pair<double, double>> test;
  for (const EpochRecord& e : epochs) {
    cumulative += e.steps;
    if (e.test_loss && std::isfinite(*e.test_loss)) {
      test.emplace_back(static_cast<double>(cumulative), *e.test_loss);
      max_loss = std::max(max_loss, *e.test_loss);
      max_step = std::max(max_step, static_cast<double>(cumulative));
    }
  }
  if (max_loss <= 0) max_loss = 1;
  auto x = [&](double step) { return left + pw * step / max_step; };
  auto y = [&](double loss) { return top + ph * (1.0 - loss / max_loss); };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
                    "\" height=\"" + std::to_string(height) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(left + pw) + "\" y2=\"" +
         num(top + ph) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(top) + "\" x2=\"" + num(left) + "\" y2=\"" +
         num(top + ph) + "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double v = max_loss * i / 4;
    svg += "<text x=\"" + num(left - 6) + "\" y=\"" + num(y(v) + 4) + "\" text-anchor=\"end\">" + num(v) +
           "</text>\n";
  }
  svg += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(height - 8.0) +
         "\" text-anchor=\"middle\">step (max " + num(max_step) + ")</text>\n";
  std::string pts;
  for (const StepRecord& s : steps)
    if (std::isfinite(s.loss)) pts += num(x(static_cast<double>(s.step))) + "," + num(y(s.loss)) + " ";
  svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
  for (const auto& [s, l] : test)
    svg += "<circle cx=\"" + num(x(s)) + "\" cy=\"" + num(y(l)) + "\" r=\"3\" fill=\"#d62728\"/>\n";
  svg += "<text x=\"" + num(left + pw - 4) + "\" y=\"" + num(top + 12) +
         "\" text-anchor=\"end\"><tspan fill=\"#1f77b4\">train loss</tspan>  <tspan fill=\"#d62728\">test "
         "loss</tspan></text>\n";
  return svg + "</svg>\n";
}

void History::save(const std::string& path) const {
  std::string text;
  if (ends_with(path, ".json"))
    text = to_json();
  else if (ends_with(path, ".csv"))
    text = to_csv();
  else if (ends_with(path, ".svg"))
    text = to_svg();
  else
    throw ConfigError("[History::save] expected a path ending in .json, .csv or .svg, got '" + path + "'");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f.flush()) throw Error("[History::save] expected to write '" + path + "', got a write error");
}

}  // namespace meganeura
