#include "gpucap/sched/job.hpp"

#include <gtest/gtest.h>

#include "gpucap/core/error.hpp"
#include "support/expect_error.hpp"

namespace gpucap::sched {
namespace {

TEST(JobSpec, ParsesEveryKey) {
  const auto job = parse_job_spec("fg=infer:keras_resnet50:batch=1:priority=high:requests=100:start=20:slo_ms=15");
  EXPECT_EQ(job.name, "fg");
  EXPECT_EQ(job.mode, Mode::inference);
  EXPECT_EQ(job.model, "keras_resnet50");
  EXPECT_EQ(job.batch_size, 1);
  EXPECT_EQ(job.priority, priority_high);
  EXPECT_EQ(job.requests, 100);
  EXPECT_FALSE(job.steps);
  EXPECT_DOUBLE_EQ(job.start_s, 20.0);
  EXPECT_DOUBLE_EQ(*job.slo_ms, 15.0);
  EXPECT_EQ(to_spec_string(job), "fg=infer:keras_resnet50:batch=1:priority=high:requests=100:start=20:slo_ms=15");
}

TEST(JobSpec, DefaultsAndSynonyms) {
  const auto bg = parse_job_spec("bg=train:keras_vgg16", 250);
  EXPECT_EQ(bg.mode, Mode::training);
  EXPECT_EQ(bg.batch_size, 32);
  EXPECT_EQ(bg.priority, priority_low);
  EXPECT_EQ(bg.steps, 250);
  const auto inf = parse_job_spec("i=inference:m:steps=7:priority=5");
  EXPECT_EQ(inf.requests, 7);  // an inference step is a request
  EXPECT_FALSE(inf.steps);
  EXPECT_EQ(inf.priority, 5);
  EXPECT_DOUBLE_EQ(*parse_job_spec("d=train:m:duration=2.5").duration_s, 2.5);
}

TEST(JobSpec, BadSpecsAreUsageErrorsNamingTheProblem) {
  const char* bad[] = {
      "noequals",          "=train:m",           "x=train",         "x=fly:m",          "x=train:m:batch=0",
      "x=train:m:batch=a", "x=train:m:steps=-1", "x=train:m:start=-1", "x=train:m:priority=urgent",
      "x=train:m:color=red", "x=train:m:steps=1:duration=2", "x=train:m:requests=5", "x=train:m:slo_ms=5",
      "x=infer:m:duration=0", "x=train:m:nokey", "x=train:m:rate=5", "x=infer:m:rate=0", "x=infer:m:input=png", "x=infer:m:reuse=",
  };
  for (const char* text : bad) {
    try {
      (void)parse_job_spec(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::usage) << text;
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }
}

TEST(JobSpec, NamesMustBeUniqueAndPresent) {
  EXPECT_THROW(check_jobs({}), Error);
  EXPECT_THROW(check_jobs({parse_job_spec("a=train:m"), parse_job_spec("a=infer:m")}), Error);
  EXPECT_NO_THROW(check_jobs({parse_job_spec("a=train:m"), parse_job_spec("b=infer:m")}));
}

// Jobs whose until= wait for each other would never end (they ran until --max-time): refused,
// naming the jobs of the cycle in order, however long it is. A chain that ends is fine.
TEST(JobSpec, UntilCyclesAreRefusedNamingTheirJobs) {
  const auto jobs = [](std::initializer_list<const char*> texts) {
    std::vector<JobSpec> v;
    for (const char* t : texts) v.push_back(parse_job_spec(t));
    return v;
  };
  test::expect_error_from([&] { check_jobs(jobs({"a=train:m:until=b", "b=train:m:until=a"})); }, ErrorCode::usage,
                          "jobs a -> b -> a wait for each other (until=)");
  test::expect_error_from(
      [&] { check_jobs(jobs({"x=infer:m", "a=train:m:until=b", "b=train:m:until=c", "c=train:m:until=a"})); },
      ErrorCode::usage, "jobs a -> b -> c -> a wait for each other (until=)");
  // A job that waits on a cycle without being in it: the message names the cycle, not the tail.
  test::expect_error_from([&] { check_jobs(jobs({"t=train:m:until=a", "a=train:m:until=b", "b=train:m:until=a"})); },
                          ErrorCode::usage, "jobs a -> b -> a wait for each other");
  EXPECT_NO_THROW(check_jobs(jobs({"a=train:m:until=b", "b=train:m:until=c", "c=infer:m:requests=5"})));
}

TEST(JobSpec, AReuseGroupHasOneBatchSize) {
  EXPECT_NO_THROW(check_jobs({parse_job_spec("a=infer:m:batch=32:reuse=g"), parse_job_spec("b=infer:n:batch=32:reuse=g"),
                              parse_job_spec("c=infer:n:batch=64:reuse=h")}));
  EXPECT_THROW(check_jobs({parse_job_spec("a=infer:m:batch=32:reuse=g"), parse_job_spec("b=infer:n:batch=64:reuse=g")}), Error);
}

}  // namespace
}  // namespace gpucap::sched
