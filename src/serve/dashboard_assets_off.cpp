// EDGELM_DASHBOARD=OFF: the binary carries no dashboard (serve/dashboard_assets.h).
#include "serve/dashboard_assets.h"

namespace edgelm::serve {

std::span<const DashboardAsset> dashboard_assets() { return {}; }

}  // namespace edgelm::serve
