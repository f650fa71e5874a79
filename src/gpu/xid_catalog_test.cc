// Xid catalog parsing and classification (catalog, driver recovery action, overrides).
#include "gpu/xid_catalog.h"

#include <gtest/gtest.h>

namespace gg::gpu {
namespace {

TEST(XidCatalogTest, BuiltinTableFromCsv) {
  const XidCatalog& c = XidCatalog::Builtin();
  EXPECT_GE(c.entries().size(), 60u);
  const XidInfo* x79 = c.Find(79);
  ASSERT_NE(x79, nullptr);
  EXPECT_EQ(x79->action, XidAction::kRestartBm);
  EXPECT_EQ(x79->category, "pcie");
  EXPECT_NE(x79->name.find("fallen off the bus"), std::string::npos);
  // The quoted name with a comma parses as one field.
  const XidInfo* x45 = c.Find(45);
  ASSERT_NE(x45, nullptr);
  EXPECT_EQ(x45->raw_action, "WORKFLOW_XID_45");
  EXPECT_EQ(x45->action, XidAction::kIgnore);
  EXPECT_EQ(c.Find(48)->action, XidAction::kResetGpu);
  EXPECT_EQ(c.Find(13)->action, XidAction::kRestartApp);
  EXPECT_EQ(c.Find(154)->action, XidAction::kUnknown);
  EXPECT_EQ(c.Find(1), nullptr);
}

// Short names come from the catalog's own `short_name` column, found by header name.
TEST(XidCatalogTest, ShortNamesFromTheCatalog) {
  EXPECT_EQ(XidShortName(79), "fallen off the bus");
  EXPECT_EQ(XidShortName(48), "double-bit ECC error");
  EXPECT_EQ(XidShortName(8), "");  // listed, no short name
  EXPECT_EQ(XidShortName(1), "");  // not listed
  auto c = XidCatalog::FromCsv(
      "xid,name,category,recommended_action,short_name,source_note\n"
      "5,X - Long,memory,RESET_GPU,short five,note\n6,Y,memory,RESET_GPU\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->Find(5)->short_name, "short five");
  EXPECT_EQ(c->Find(6)->short_name, "");  // a short row leaves it empty
  auto without =
      XidCatalog::FromCsv("xid,name,category,recommended_action\n5,X,memory,RESET_GPU\n");
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->Find(5)->short_name, "");
}

TEST(XidCatalogTest, CsvErrorsNameTheLine) {
  auto bad = XidCatalog::FromCsv(
      "xid,name,category,recommended_action\n79,a,b,RESTART_BM\nxx,a,b,IGNORE\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 3"), std::string::npos) << bad.status();
  EXPECT_FALSE(XidCatalog::FromCsv("nope\n").ok());
  EXPECT_FALSE(
      XidCatalog::FromCsv("xid,name,category,recommended_action\n1,\"open,b,c,IGNORE\n").ok());
  EXPECT_FALSE(
      XidCatalog::FromCsv("xid,name,category,recommended_action\n1,a,b,IGNORE\n1,a,b,IGNORE\n")
          .ok());
  auto ok =
      XidCatalog::FromCsv("xid,name,category,recommended_action\r\n7,\"a, b\",c,RESET_GPU\r\n\r\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->Find(7)->name, "a, b");
}

TEST(XidClassifierTest, CatalogAndUnknown) {
  XidClassifier c;
  auto x79 = c.Classify(79);
  EXPECT_EQ(x79.action_name, "RESTART_BM");
  EXPECT_TRUE(x79.critical);
  EXPECT_EQ(x79.decided_by, XidDecision::kCatalog);
  auto x13 = c.Classify(13);
  EXPECT_EQ(x13.action, XidAction::kRestartApp);
  EXPECT_FALSE(x13.critical);
  // Unlisted Xids are not healthy.
  auto x999 = c.Classify(999);
  EXPECT_EQ(x999.action, XidAction::kUnknown);
  EXPECT_TRUE(x999.critical);
  EXPECT_EQ(x999.category, "unknown");
  EXPECT_EQ(x999.decided_by, XidDecision::kUnlisted);
}

TEST(XidClassifierTest, DriverRecoveryActionWins) {
  XidClassifier c;
  auto x = c.Classify(13, RecoveryAction::kGpuReset);
  EXPECT_EQ(x.action, XidAction::kResetGpu);
  EXPECT_EQ(x.decided_by, XidDecision::kDriverRecoveryAction);
  EXPECT_EQ(c.Classify(31, RecoveryAction::kNodeReboot).action, XidAction::kRestartBm);
  EXPECT_EQ(c.Classify(31, RecoveryAction::kDrainAndReset).action_name, "DRAIN_AND_RESET");
  // None does not downgrade the catalog...
  EXPECT_EQ(c.Classify(79, RecoveryAction::kNone).action, XidAction::kRestartBm);
  // ...except for Xid 154, whose meaning is the recovery action itself.
  EXPECT_EQ(c.Classify(154, RecoveryAction::kNone).action, XidAction::kIgnore);
  EXPECT_EQ(c.Classify(154, RecoveryAction::kGpuReset).action, XidAction::kResetGpu);
  EXPECT_EQ(c.Classify(154, static_cast<RecoveryAction>(42)).action, XidAction::kUnknown);
}

TEST(XidClassifierTest, FlagOverrides) {
  XidOverrides o;
  ASSERT_TRUE(o.AddIgnoreList("13, 31,79").ok());
  ASSERT_TRUE(o.AddCriticalList("79,43").ok());
  EXPECT_FALSE(o.AddIgnoreList("13,abc,-4").ok());
  XidClassifier c(o);
  EXPECT_EQ(c.Classify(13).action, XidAction::kIgnore);
  EXPECT_EQ(c.Classify(13).decided_by, XidDecision::kOverrideIgnore);
  // Critical beats ignore; a more severe catalog action is kept.
  EXPECT_EQ(c.Classify(79).action, XidAction::kRestartBm);
  EXPECT_EQ(c.Classify(79).decided_by, XidDecision::kOverrideCritical);
  EXPECT_EQ(c.Classify(43).action, XidAction::kResetGpu);
  // Overrides beat the driver's recovery action for the Xid classification.
  EXPECT_EQ(c.Classify(31, RecoveryAction::kGpuReset).action, XidAction::kIgnore);
}

TEST(XidClassifierTest, DevicePluginEnvSemantics) {
  {
    XidOverrides o;
    std::vector<std::string> skipped;
    o.ApplyDpDisableHealthchecks("94, 119,bogus", &skipped);
    EXPECT_EQ(skipped, std::vector<std::string>{"bogus"});
    XidClassifier c(o);
    EXPECT_EQ(c.Classify(94).action, XidAction::kIgnore);
    EXPECT_EQ(c.Classify(119).action, XidAction::kIgnore);
    EXPECT_EQ(c.Classify(79).action, XidAction::kRestartBm);
  }
  {
    XidOverrides o;
    o.ApplyDpDisableHealthchecks("XIDS");
    EXPECT_TRUE(o.all_ignored);
    o.ApplyDpEnableHealthchecks("48,79");
    XidClassifier c(o);
    EXPECT_EQ(c.Classify(13).action, XidAction::kIgnore);
    EXPECT_EQ(c.Classify(999).action, XidAction::kIgnore);
    // Unlike the device plugin's short-circuit, enabled Xids stay critical under "all".
    EXPECT_TRUE(c.Classify(48).critical);
    EXPECT_TRUE(c.Classify(79).critical);
  }
  {
    XidOverrides o;
    o.ApplyDpEnableHealthchecks("all");
    XidClassifier c(o);
    EXPECT_TRUE(c.Classify(13).critical);
    EXPECT_TRUE(c.Classify(43).critical);
  }
  {
    XidOverrides o;
    o.device_plugin_defaults = true;
    o.ApplyDpEnableHealthchecks("109");
    XidClassifier c(o);
    for (int x : {13, 31, 43, 45, 68}) EXPECT_EQ(c.Classify(x).action, XidAction::kIgnore) << x;
    EXPECT_TRUE(c.Classify(109).critical);
  }
}

TEST(XidClassifierTest, SxidAndRecoveryText) {
  XidClassifier c;
  EXPECT_EQ(c.ClassifySxid(20034, true).action, XidAction::kResetGpu);
  EXPECT_EQ(c.ClassifySxid(28006, false).action, XidAction::kIgnore);
  EXPECT_EQ(c.ClassifySxid(26008, std::nullopt).action, XidAction::kUnknown);
  EXPECT_EQ(ParseRecoveryActionChange(
                "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"),
            RecoveryAction::kGpuReset);
  EXPECT_EQ(ParseRecoveryActionChange("changed from 0x1 (x) to 0x2 (Node Reboot Required)"),
            RecoveryAction::kNodeReboot);
  EXPECT_FALSE(ParseRecoveryActionChange("garbage"));
  EXPECT_EQ(ParseXidAction("RESET_GPU"), XidAction::kResetGpu);
  EXPECT_FALSE(ParseXidAction("nope"));
}

}  // namespace
}  // namespace gg::gpu
