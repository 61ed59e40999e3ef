// Audit reports as evidence (AuditLedger): confirmation needs a second,
// different reporter of the same object (key, checksum and writer) in the
// first report's tenant, even after the key was dropped; the first reporter
// cannot choose whom a confirmation counts; reporters are rate-limited and a
// full table of them makes room for new ones once their buckets refill.
#include "pikv/controller/audit_ledger.h"

#include <gtest/gtest.h>

namespace pikv::controller {
namespace {

using Verdict = AuditLedger::Verdict;
using Clock = AuditLedger::Clock;

AuditLedger::Report Of(const std::string& reporter, const std::string& tenant, bool held,
                       const std::string& writer, uint64_t checksum = 7) {
  AuditLedger::Report r;
  r.reporter = reporter;
  r.tenant = tenant;
  r.held = held;
  r.key = ChunkKey{1, 2};
  r.checksum = checksum;
  r.writer = writer;
  return r;
}

TEST(AuditLedgerTest, ASecondReporterConfirmsWithinTheTenantEvenAfterTheDrop) {
  AuditLedger ledger;
  const auto now = Clock::now();
  EXPECT_EQ(ledger.Take(Of("a1", "acme", true, "poisoner"), now), Verdict::kDropped);
  // The key is gone from the registry now (dropped). Another tenant's
  // engine, or another object (checksum, writer), confirms nothing.
  EXPECT_EQ(ledger.Take(Of("g1", "globex", false, "poisoner"), now), Verdict::kIgnored);
  EXPECT_EQ(ledger.Take(Of("a2", "acme", false, "poisoner", 8), now), Verdict::kIgnored);
  EXPECT_EQ(ledger.Take(Of("a2", "acme", false, "honest"), now), Verdict::kIgnored);
  EXPECT_EQ(ledger.Take(Of("a1", "acme", false, "poisoner"), now), Verdict::kDropped)
      << "the first reporter again: evidence, no confirmation";
  EXPECT_EQ(ledger.Stats().confirmed, 0u);
  EXPECT_EQ(ledger.Take(Of("a2", "acme", false, "poisoner"), now), Verdict::kConfirmed);
  EXPECT_EQ(ledger.Take(Of("a3", "acme", false, "poisoner"), now), Verdict::kDropped)
      << "counted once";
  const AuditStats s = ledger.Stats();
  EXPECT_EQ(s.confirmed, 1u);
  EXPECT_EQ(s.confirmed_by_writer.at("poisoner"), 1u);
  EXPECT_EQ(s.reports_by_reporter.count("g1"), 0u) << "ignored reports are not taken";
}

TEST(AuditLedgerTest, TheFirstReporterCannotChooseWhomASecondReportCounts) {
  AuditLedger ledger;
  const auto now = Clock::now();
  // A hostile first reporter names an honest writer for an object with
  // several writers; an honest auditor names the one its object says.
  EXPECT_EQ(ledger.Take(Of("hostile", "acme", true, "honest"), now), Verdict::kDropped);
  EXPECT_EQ(ledger.Take(Of("auditor", "acme", true, "poisoner"), now), Verdict::kDropped);
  EXPECT_EQ(ledger.Stats().confirmed, 0u);
  EXPECT_TRUE(ledger.Stats().confirmed_by_writer.empty());
}

TEST(AuditLedgerTest, AFullTableOfReportersMakesRoomOnceTheirBucketsRefill) {
  AuditLedger ledger;
  auto now = Clock::now();
  for (size_t i = 0; i < AuditLedger::kMaxNames; ++i)
    EXPECT_EQ(ledger.Take(Of("r" + std::to_string(i), "acme", true, "w", 0), now),
              Verdict::kDropped);
  EXPECT_EQ(ledger.Take(Of("newcomer", "acme", true, "w", 0), now), Verdict::kRefused);
  now += std::chrono::minutes(1);  // every bucket full again
  EXPECT_EQ(ledger.Take(Of("newcomer", "acme", true, "w", 0), now), Verdict::kDropped);
}

}  // namespace
}  // namespace pikv::controller
