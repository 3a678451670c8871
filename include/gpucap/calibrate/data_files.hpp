#pragma once
// Writing fitted values back into the twin's data files.

#include <functional>
#include <string>
#include <vector>

#include "gpucap/calibrate/model.hpp"

namespace gpucap::calibrate {

// One fit's values to write: where it started and where it ended, for these parameters.
struct FittedValues {
  const TwinParams* start = nullptr;
  const TwinParams* fitted = nullptr;
  const std::vector<FitParameter>* parameters = nullptr;
};

// Sets every parameter's key in its data file to the fitted value (6 significant digits) and
// records the fit's starting value under "_prior" unless a prior is already there (so repeated
// calibrations always start from the hand estimate). `note_for(file)` goes to the file's
// "_calibration". Several fits may set keys of one file. Keys keep their original order. Every
// new file is first loaded as the catalogue loads it: if one would not load, no file is changed
// (Error(invalid_data) naming it). Error(io/invalid_data).
void write_fitted_parameters(const std::vector<FittedValues>& fits,
                             const std::function<std::string(const std::string& file)>& note_for);
inline void write_fitted_parameters(const TwinParams& start, const TwinParams& fitted,
                                    const std::vector<FitParameter>& parameters, const std::string& note) {
  write_fitted_parameters({{&start, &fitted, &parameters}}, [&note](const std::string&) { return note; });
}

// The data file a parameter lives in.
[[nodiscard]] const std::string& data_file_of(const TwinParams& params, const FitParameter& parameter);

// A value rounded to 6 significant digits, as written to the files.
[[nodiscard]] double round_for_file(double value);

}  // namespace gpucap::calibrate
