Tensor t = linspace(0.0, 1.0, 5)
show(t.layout());
