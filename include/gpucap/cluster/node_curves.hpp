#pragma once
// The curve a real node publishes (curve.hpp): its capacity under each cap — from the twin
// (twin_curves.hpp) or from a measured profile of the model on the GPU (`gpucap tune --json`) —
// clipped to the demand it measures, so that power goes where requests are waiting.

#include <optional>

#include "gpucap/cluster/curve.hpp"
#include "gpucap/cluster/twin_curves.hpp"
#include "gpucap/predict/profile_model.hpp"

namespace gpucap::cluster {

// The capacity within the SLO under each of `grid_points` caps from min_cap_w to max_cap_w: the
// highest throughput of a profiled configuration whose measured highest power is at or under the
// cap and whose batch takes at most half the SLO (a request may wait one batch, then run in the
// next). Error(usage) for a bad range or SLO.
[[nodiscard]] NodeCurve profile_capacity_curve(const predict::ProfileModel& profile, double slo_s, double min_cap_w,
                                               double max_cap_w, double tdp_w, std::size_t grid_points = 26);

// The twin's capacity as a curve over [max(min_cap_w, the GPU's lowest limit), its highest].
[[nodiscard]] NodeCurve twin_capacity_curve(const TwinCapacity& capacity, double min_cap_w);

// What the node can use: the capacity, at most `headroom` × the measured demand (requests/s).
// No demand measured yet (nullopt): the capacity itself.
[[nodiscard]] NodeCurve demand_clipped(NodeCurve capacity, std::optional<double> demand_rps, double headroom = 1.2);

}  // namespace gpucap::cluster
