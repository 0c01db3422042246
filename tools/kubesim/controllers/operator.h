// kubesim's KubeRay operator: the RayJob and RayCluster controllers, registered together as the
// "operator" controller (--controllers operator). See docs/kubesim.md.
#pragma once

#include <memory>

#include "controllers/controller.h"

namespace kubesim::controllers {

std::unique_ptr<Controller> NewRayClusterController();  // raycluster.cc
std::unique_ptr<Controller> NewRayJobController();      // rayjob.cc

}  // namespace kubesim::controllers
