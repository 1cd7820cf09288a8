irdl.dialect @cmath {
  irdl.type @complex {
    %0 = irdl.is f32
    irdl.parameters(elem: %0)
  }
}
irdl.dialect @cmath {
  irdl.operation @norm {
    %0 = irdl.any
    %1 = irdl.parametric @cmath::@complex<%0>
    irdl.operands(in: %1)
    irdl.results(out: %0)
  }
}
