// gpucap list gpus|models|datasets|algorithms|matrices|share

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "gpucap/bench/cluster_matrix.hpp"
#include "gpucap/bench/matrix.hpp"
#include "gpucap/bench/serve_bench.hpp"
#include "gpucap/cli/commands.hpp"
#include "gpucap/control/registry.hpp"
#include "gpucap/core/files.hpp"
#include "gpucap/core/text.hpp"
#include "gpucap/sim/catalog.hpp"
#include "gpucap/sim/share_twin.hpp"

namespace gpucap::cli {

namespace {

struct ListFlags {
  std::string what;
  bool json = false;
};

std::string clock_summary(const std::vector<double>& clocks) {
  if (clocks.size() == 1) return fmt::format("{:g}", clocks.front());
  return fmt::format("{:g}-{:g} ({} levels)", clocks.front(), clocks.back(), clocks.size());
}

void list_gpus(const sim::Catalog& catalog, bool json) {
  nlohmann::json out = nlohmann::json::array();
  if (!json) fmt::print("{:<10} {:<24} {:>4} {:>22} {:>16} {:>16} {:>7}\n", "id", "name", "SMs", "SM clocks (MHz)",
                        "memory (MHz)", "power limit (W)", "idle W");
  for (const auto& g : catalog.gpus()) {
    if (json) {
      out.push_back({{"id", g.id}, {"name", g.name}, {"aliases", g.aliases}, {"sm_count", g.sm_count},
                     {"sm_clocks_mhz", g.sm_clocks_mhz}, {"memory_clocks_mhz", g.memory_clocks_mhz},
                     {"dvfs_levels_mhz", g.dvfs_levels_mhz},
                     {"power_limit_w", {{"min", g.power_limit_min_w}, {"max", g.power_limit_max_w},
                                        {"default", g.power_limit_default_w}}},
                     {"idle_power_w", g.idle_power_w}, {"simulated", true}});
    } else {
      fmt::print("{:<10} {:<24} {:>4} {:>22} {:>16} {:>16} {:>7}\n", g.id, g.name, g.sm_count,
                 clock_summary(g.sm_clocks_mhz), clock_summary(g.memory_clocks_mhz),
                 fmt::format("{:g}-{:g}", g.power_limit_min_w, g.power_limit_max_w), fmt::format("{:g}", g.idle_power_w));
    }
  }
  if (json) std::cout << out.dump(2) << "\n";
}

void list_models(const sim::Catalog& catalog, bool json) {
  nlohmann::json out = nlohmann::json::array();
  if (!json) fmt::print("{:<20} {:<12} {:>6} {:>10} {:>8} {:>10}\n", "id", "family", "input", "params M", "GMACs",
                        "precision");
  for (const auto& m : catalog.models()) {
    if (json) {
      out.push_back({{"id", m.id}, {"name", m.name}, {"aliases", m.aliases}, {"family", m.family},
                     {"input_size", m.input_size}, {"params_m", m.params_m}, {"gmacs", m.gmacs},
                     {"activation_melems", m.activation_melems}, {"layers", m.layers},
                     {"precision", sim::to_string(m.precision)}});
    } else {
      fmt::print("{:<20} {:<12} {:>6} {:>10g} {:>8g} {:>10}\n", m.id, m.family, m.input_size, m.params_m, m.gmacs,
                 sim::to_string(m.precision));
    }
  }
  if (json) std::cout << out.dump(2) << "\n";
}

void list_datasets(const sim::Catalog& catalog, bool json) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : catalog.datasets()) {
    if (json) {
      out.push_back({{"id", d.id}, {"name", d.name}, {"aliases", d.aliases}, {"images", d.images}});
    } else {
      fmt::print("{:<12} {:>7} images  {}\n", d.id, d.images, d.name);
    }
  }
  if (json) std::cout << out.dump(2) << "\n";
}

void list_algorithms(bool json) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : control::algorithms()) {
    if (json) {
      out.push_back({{"name", a.name}, {"summary", a.summary}, {"knobs", a.knobs}, {"source", a.source}, {"twin", true},
                     {"real_gpu", a.real_gpu}});
    } else {
      fmt::print("{:<11} [{}] {}\n{:<11} source: {}\n{:<11} runs on: the twin; a real GPU: {}\n", a.name, a.knobs, a.summary, "",
                 a.source, "", a.real_gpu);
    }
  }
  if (json) std::cout << out.dump(2) << "\n";
}

void list_matrices(const std::string& data_dir, bool json) {
  const auto files = list_files((std::filesystem::path(data_dir) / "matrices").string(), ".json");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& file : files) {
    if (bench::is_serve_matrix(file)) {
      // A serving matrix (bench/serve_bench.hpp): GPUs × models × loads.
      const auto serve = bench::load_serve_matrix(file);
      std::vector<std::string> gpus;
      std::size_t cells = 0;
      for (const auto& g : serve.gpus) {
        gpus.push_back(g.gpu);
        cells += g.models.size() * serve.loads.size();
      }
      if (json) {
        out.push_back({{"id", serve.id}, {"gpu", join(gpus, ",")}, {"cells", cells}, {"description", serve.description}});
      } else {
        fmt::print("{:<16} gpu {:<8} {:>3} cells {}\n", serve.id, join(gpus, ","), cells, serve.description);
      }
      continue;
    }
    if (bench::is_cluster_matrix(file)) {
      // A cluster matrix (bench/cluster_matrix.hpp): cells of `cluster simulate`, twin nodes of every GPU.
      const auto cluster = bench::load_cluster_matrix(file);
      if (json) {
        out.push_back({{"id", cluster.id}, {"gpu", "many"}, {"cells", cluster.cells.size()}, {"description", cluster.description}});
      } else {
        fmt::print("{:<16} gpu {:<8} {:>3} cells {}\n", cluster.id, "many", cluster.cells.size(), cluster.description);
      }
      continue;
    }
    const auto matrix = bench::load_matrix(file);
    if (json) {
      out.push_back({{"id", matrix.id}, {"gpu", matrix.gpu}, {"jobs", matrix.jobs.size()},
                     {"description", matrix.description}});
    } else {
      fmt::print("{:<16} gpu {:<8} {:>3} jobs  {}\n", matrix.id, matrix.gpu, matrix.jobs.size(), matrix.description);
    }
  }
  // SwitchFlow's experiments on the share twin (bench/switchflow_paper.hpp, bench/cap_share_bench.hpp).
  const std::vector<std::pair<std::string, std::string>> share = {
      {"switchflow-fig6", "SwitchFlow Fig. 6: p95 of a BS-1 inference beside training, TF threads vs SwitchFlow"},
      {"switchflow-fig7", "SwitchFlow Fig. 7: two training jobs under threads, MPS and SwitchFlow (CPU or GPU LPU)"},
      {"switchflow-table1", "SwitchFlow Table 1: state transfer 2080 Ti to 1080 Ti"},
      {"switchflow-fig8", "SwitchFlow Fig. 8: two identical models sharing one JPEG input pipeline"},
      {"switchflow-fig9", "SwitchFlow Fig. 9: two or three different models sharing one input pipeline (V100)"},
      {"switchflow-fig10", "SwitchFlow Fig. 10: interleaving independent models with JPEG input pipelines"},
      {"switchflow-h200", "The share twin's h200 against gpucap's real H200 run: a BS-1 inference beside training"},
      {"switchflow-cap", "gpucap's capshare against SwitchFlow and the best static setting under a stepping cap"}};
  for (const auto& [id, description] : share) {
    if (json) {
      out.push_back({{"id", id}, {"gpu", "share twin"}, {"description", description}});
    } else {
      fmt::print("{:<18} share twin    {}\n", id, description);
    }
  }
  if (json) std::cout << out.dump(2) << "\n";
}

// The share twin's models and devices (gpucap share).
void list_share(const std::string& data_dir, bool json) {
  const sim::ShareTwin twin(data_dir);
  nlohmann::json out = {{"models", nlohmann::json::array()}, {"devices", nlohmann::json::array()}};
  if (!json) fmt::print("models (gpucap share --job NAME=MODE:MODEL...):\n");
  for (const auto& id : twin.model_ids()) {
    const auto& m = twin.model(id);
    if (json) {
      out["models"].push_back({{"id", id}, {"name", m.name}, {"params", m.params_total}, {"input_size", m.input_size}});
    } else {
      fmt::print("  {:<28} {:>6.1f} M parameters  {}\n", id, m.params_total / 1e6, m.name);
    }
  }
  if (!json) fmt::print("devices (--gpu, --lpu):\n");
  for (const auto& id : twin.device_ids()) {
    const auto d = twin.device(id);
    const bool gpu = d.kind == sched::DeviceKind::gpu;
    if (json) {
      out["devices"].push_back({{"id", id}, {"kind", gpu ? "gpu" : "cpu"}, {"memory_bytes", d.memory_bytes}, {"max_power_w", d.max_power_w}});
    } else {
      fmt::print("  {:<10} {}{}\n", id, gpu ? "GPU" : "CPU", gpu ? fmt::format(", {:.1f} GiB usable, {:g} W", d.memory_bytes / (1024.0 * 1024 * 1024), d.max_power_w) : "");
    }
  }
  if (json) std::cout << out.dump(2) << "\n";
}

}  // namespace

Command add_list_command(CLI::App& app, const GlobalOptions& global) {
  auto flags = std::make_shared<ListFlags>();
  auto* cmd = app.add_subcommand("list", "List the GPUs, models, datasets, algorithms or task matrices gpucap knows");
  cmd->add_option("what", flags->what, "gpus | models | datasets | algorithms | matrices | share (gpucap share's models and devices)")
      ->required()
      ->check(CLI::IsMember({"gpus", "models", "datasets", "algorithms", "matrices", "share"}));
  cmd->add_flag("--json", flags->json, "Print JSON");
  return Command{cmd, [flags, &global] {
                   if (flags->what == "algorithms") return list_algorithms(flags->json);
                   const auto data_dir = resolve_data_dir(global);
                   if (flags->what == "matrices") return list_matrices(data_dir, flags->json);
                   if (flags->what == "share") return list_share(data_dir, flags->json);
                   const auto catalog = sim::Catalog::load(data_dir);
                   if (flags->what == "gpus") return list_gpus(catalog, flags->json);
                   if (flags->what == "models") return list_models(catalog, flags->json);
                   list_datasets(catalog, flags->json);
                 }};
}

}  // namespace gpucap::cli
