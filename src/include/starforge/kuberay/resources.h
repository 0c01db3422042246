// KubeRay's kinds as the Kubernetes client addresses them (ray.io/v1, names in constants.h).
#pragma once

#include "starforge/kube/resource.h"
#include "starforge/kuberay/constants.h"

namespace starforge::kuberay {

inline const kube::ResourceRef kRayJobs{kRayApiGroup, kRayVersion, "rayjobs", true, kRayJobKind};
inline const kube::ResourceRef kRayClusters{kRayApiGroup, kRayVersion, "rayclusters", true,
                                            kRayClusterKind};

}  // namespace starforge::kuberay
